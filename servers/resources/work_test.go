package resources

import "testing"

func TestWorkZeroAddsNothing(t *testing.T) {
	for _, micros := range []int{0, -5} {
		if n := calibrateWork(micros); n != 0 {
			t.Errorf("calibrateWork(%d) = %d rounds, want 0", micros, n)
		}
	}
	if v := newVerifier(Defaults()); v.workRounds != 0 {
		t.Errorf("default config: %d work rounds per verification, want 0", v.workRounds)
	}
}

func TestWorkIsCalibrated(t *testing.T) {
	v := newVerifier(Config{WorkMicros: 100})
	if v.workRounds < 1 {
		t.Fatalf("work_us=100: %d rounds per verification, want at least 1", v.workRounds)
	}
	a, b := doWork("task-1", v.workRounds), doWork("task-2", v.workRounds)
	if a == b {
		t.Errorf("work on two different tasks gave the same word %#x", a)
	}
	if again := doWork("task-1", v.workRounds); again != a {
		t.Errorf("work is not deterministic: %#x then %#x", a, again)
	}
}
