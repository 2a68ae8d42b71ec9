package hybrid

import (
	"reflect"

	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/strategies/tp"
)

// Activations is what a chunk's activation slots held: the most slots
// in use at once (micro-batches in flight), the bytes of one slot (the
// float32 buffers its layers keep between calls: activations for
// backward and the gradients' scratch), and their product, the peak.
type Activations struct {
	InFlight  int
	SlotBytes int64
	Peak      int64
}

// Activations measures the chunk's slots; it walks the layers' buffers,
// so call it after a step, not during one.
func (p *Part) Activations() Activations {
	var most int64
	for _, s := range p.all {
		most = max(most, heldBytes(s))
	}
	return Activations{InFlight: p.peak, SlotBytes: most, Peak: int64(p.peak) * most}
}

// heldBytes sums the capacity of the float32 and int32 slices reachable
// from v, each backing array once, without following the parameters
// (the store's, shared by every slot), the group or the random streams.
func heldBytes(v any) int64 {
	seen := map[uintptr]bool{}
	var n int64
	skip := map[reflect.Type]bool{
		reflect.TypeFor[*nn.Param]():  true,
		reflect.TypeFor[*tp.Group]():  true,
		reflect.TypeFor[*nn.Stream](): true,
	}
	var walk func(x reflect.Value)
	walk = func(x reflect.Value) {
		if skip[x.Type()] {
			return
		}
		switch x.Kind() {
		case reflect.Pointer:
			if x.IsNil() || seen[x.Pointer()] {
				return
			}
			seen[x.Pointer()] = true
			walk(x.Elem())
		case reflect.Interface:
			if !x.IsNil() {
				walk(x.Elem())
			}
		case reflect.Struct:
			for i := 0; i < x.NumField(); i++ {
				walk(x.Field(i))
			}
		case reflect.Slice:
			if x.IsNil() {
				return
			}
			switch x.Type().Elem().Kind() {
			case reflect.Float32, reflect.Int32:
				if !seen[x.Pointer()] {
					seen[x.Pointer()] = true
					n += int64(x.Cap()) * 4
				}
			case reflect.Pointer, reflect.Struct, reflect.Interface, reflect.Slice:
				for i := 0; i < x.Len(); i++ {
					walk(x.Index(i))
				}
			}
		case reflect.Func, reflect.Map, reflect.Chan:
			// closures (dropout's row maps) and the like hold no activations
		}
	}
	walk(reflect.ValueOf(v))
	return n
}
