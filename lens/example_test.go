package lens_test

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/trace"

	"github.com/gymlens/gymlens/lens"
)

// An instrumentation site keeps all its work behind the gate, so a disabled
// group costs one atomic load and a bit test.
func ExampleEnabled() {
	ctx := context.Background()
	if lens.Enabled(lens.GroupStep) {
		var span trace.Span
		ctx, span = lens.Start(ctx, lens.GroupStep, "train.step")
		defer span.End()
	}
	fmt.Println(lens.Enabled(lens.GroupStep))
	// Output: false
}

func ExampleGroupSet_Resolve() {
	groups := lens.NewGroupSet()
	_ = groups.DefinePreset("training", "step", "forward_backward", "optimizer")
	mask, err := groups.Resolve(" Training, JOB ")
	fmt.Println(groups.Names(mask), err)
	// Output: [forward_backward job optimizer step] <nil>
}

func ExampleAttr() {
	kv, ok := lens.Attr("llm.api_key", "sk-secret")
	fmt.Println(kv.Value.AsString(), ok)
	_, ok = lens.Attr("tool.args", []string{"rm", "-rf"})
	fmt.Println(ok)
	// Output:
	// [REDACTED] true
	// false
}
