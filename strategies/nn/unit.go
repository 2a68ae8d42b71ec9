package nn

import "fmt"

// Unit is a group of a model's parameters that run together (a layer, a
// transformer block) and occupy one contiguous range [Lo, Hi) of the flat
// buffers. A sharding driver (strategies/zero) gathers, frees and reduces
// a model unit by unit: it learns when each unit runs from the Store's
// unit hook, and may point the unit's Param views (W and G) at buffers
// of its own for that time.
type Unit struct {
	Name   string
	Lo, Hi int
	Params []*Param // in layout order
}

// Len is the unit's number of elements.
func (u Unit) Len() int { return u.Hi - u.Lo }

// Phase says where in a unit's computation the unit hook is called.
type Phase uint8

// The phases, in the order of one forward and one backward pass.
const (
	BeforeForward  Phase = iota // the unit's parameters are about to be read
	AfterForward                // its forward is done: they are not needed until BeforeBackward
	BeforeBackward              // its parameters are read and its gradients added
	AfterBackward               // its gradients are complete (every Ready of it was called)
)

var phaseNames = [...]string{"before-forward", "after-forward", "before-backward", "after-backward"}

func (p Phase) String() string { return phaseNames[p] }

// OnUnit sets the function that Forward and Backward call around each
// unit of the model, with the unit's index in Units; nil removes it. A
// Forward calls it BeforeForward and AfterForward for every unit, in
// layout order; a Backward BeforeBackward and AfterBackward, in reverse.
// The hook runs on the goroutine of the pass.
func (s *Store) OnUnit(f func(u int, ph Phase)) { s.unit = f }

// Enter calls the unit hook, if any. Models call it.
func (s *Store) Enter(u int, ph Phase) {
	if s.unit != nil {
		s.unit(u, ph)
	}
}

// SetUnits declares the model's units, as groups of parameters in
// forward order. The groups must tile the flat buffers in layout order:
// each starts where the one before ends, and they cover every parameter.
func (s *Store) SetUnits(names []string, groups [][]*Param) error {
	var units []Unit
	at := 0
	for i, g := range groups {
		u := Unit{Name: names[i], Lo: at, Hi: at, Params: g}
		for _, p := range g {
			if p.Offset != u.Hi {
				return fmt.Errorf("unit %s: parameter %s starts at %d, want %d: units must tile the parameters in layout order", u.Name, p.Name, p.Offset, u.Hi)
			}
			u.Hi = p.End()
		}
		at = u.Hi
		units = append(units, u)
	}
	if at != len(s.W) {
		return fmt.Errorf("the units end at element %d of %d: every parameter must belong to a unit", at, len(s.W))
	}
	s.Units = units
	return nil
}
