package arithmetic

import "testing"

func TestWorkZeroAddsNothing(t *testing.T) {
	for _, micros := range []int{0, -5} {
		if n := calibrateWork(micros); n != 0 {
			t.Errorf("calibrateWork(%d) = %d rounds, want 0", micros, n)
		}
	}
}

func TestWorkIsCalibrated(t *testing.T) {
	rounds := calibrateWork(100)
	if rounds < 1 {
		t.Fatalf("work_us=100: %d rounds per verification, want at least 1", rounds)
	}
	a, b := doWork("task-1", rounds), doWork("task-2", rounds)
	if a == b {
		t.Errorf("work on two different tasks gave the same word %#x", a)
	}
	if again := doWork("task-1", rounds); again != a {
		t.Errorf("work is not deterministic: %#x then %#x", a, again)
	}
}
