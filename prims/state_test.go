package prims

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	"github.com/gorun-hpc/gorun/net/mem"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/topo"
)

// TestStateCached checks that the hierarchical split is made once per
// communicator, and that a communicator split from another does not take
// its parent's state (Split copies values).
func TestStateCached(t *testing.T) {
	hosts := []string{"a", "a", "b", "b"}
	nw := mem.NewNetwork(len(hosts))
	peers := make([]spmd.Peer, len(hosts))
	for i, h := range hosts {
		peers[i] = spmd.Peer{Rank: i, HostID: h}
	}
	errs := make(chan error, len(hosts))
	for i := range hosts {
		w, err := spmd.New(nw.Transport(i), i, peers)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		go func() { errs <- stateCached(w) }()
	}
	for range hosts {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func stateCached(w *spmd.World) error {
	ctx, cancel := context.WithTimeout(context.Background(), spmdtest.Timeout)
	defer cancel()
	buf := []float32{1, 2, 3}
	hierAlgo := WithAlgo(topo.Hierarchical)
	if err := AllReduce(ctx, w.Comm, buf, Sum[float32](), hierAlgo); err != nil {
		return err
	}
	st := stateOf(w.Collective())
	h := st.hier
	if err := AllReduce(ctx, w.Comm, buf, Sum[float32](), hierAlgo); err != nil {
		return err
	}
	if h == nil || st.hier != h || stateOf(w.Collective()) != st {
		return fmt.Errorf("rank %d: state or split not cached: %p %p", w.Rank(), h, st.hier)
	}
	child, err := w.Split(ctx, 0, -w.Rank())
	if err != nil {
		return err
	}
	if err := AllReduce(ctx, child, buf, Sum[float32](), hierAlgo); err != nil {
		return err
	}
	cs := stateOf(child.Collective())
	if cs == st || cs.hier == h || cs.owner != child.Collective().ID() {
		return fmt.Errorf("rank %d: the child shares its parent's state", w.Rank())
	}
	if buf[0] != 64 { // three sums over four ranks
		return fmt.Errorf("rank %d: got %v", w.Rank(), buf)
	}
	return nil
}

// TestCallReset checks that reset zeroes every field of a call but keeps
// its releases' array, emptied, and its ints (scratch that every use
// overwrites): start sets a recycled call's fields one by
// one and counts on the rest being zero, so a field added to call and
// not to reset would carry one call's value into the next.
func TestCallReset(t *testing.T) {
	var k call
	v := reflect.ValueOf(&k).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
		switch f.Kind() {
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		case reflect.Interface:
			f.Set(reflect.ValueOf(context.Background()))
		case reflect.String:
			f.SetString("x")
		case reflect.Int:
			f.SetInt(1)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 1, 4))
		case reflect.Array:
			for j := range f.Len() {
				f.Index(j).Set(reflect.MakeSlice(f.Type().Elem(), 1, 4))
			}
		default:
			t.Fatalf("call.%s: a %s, which this test cannot fill", v.Type().Field(i).Name, f.Kind())
		}
	}
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("call.%s was not filled", v.Type().Field(i).Name)
		}
	}
	k.releases[0] = lease{sp: new(spare)}
	releases, ints := k.releases, k.ints
	k.reset()
	for i := range ints {
		if &k.ints[i][0] != &ints[i][0] {
			t.Errorf("reset dropped ints[%d]", i)
		}
	}
	k.ints = [len(k.ints)][]int{}
	if len(k.releases) != 0 || cap(k.releases) != cap(releases) {
		t.Errorf("releases after reset: len %d cap %d, want len 0 cap %d", len(k.releases), cap(k.releases), cap(releases))
	}
	k.releases = nil
	for i := range v.NumField() {
		if !v.Field(i).IsZero() {
			t.Errorf("call.%s is not zero after reset", v.Type().Field(i).Name)
		}
	}
	if releases[0] != (lease{}) {
		t.Errorf("reset left the release it held: %+v", releases[0])
	}
}
