package tp_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/strategies/tp"
)

// ceResult is a rank's loss and its columns of the logits' gradient (a
// whole, NaN elsewhere).
type ceResult struct {
	loss float32
	dx   []float32
}

// TestCrossEntropy checks the vocabulary-parallel loss against nn's, the
// vocabulary cut unevenly over 3 and 4 ranks, with ignored rows.
func TestCrossEntropy(t *testing.T) {
	const vocab, rows, scale = 10, 8, 1.5
	cases := []struct {
		name    string
		targets []int32
		spread  float32 // the logits' standard deviation
	}{
		{"some ignored", []int32{3, -1, 9, 0, -1, 5, 7, 2}, 2},
		{"none ignored", []int32{0, 1, 2, 3, 4, 5, 6, 9}, 1},
		{"all ignored", []int32{-1, -1, -1, -1, -1, -1, -1, -1}, 1},
		{"large logits", []int32{3, -1, 9, 0, -100, 5, 7, 8}, 60},
	}
	for _, tc := range cases {
		for _, size := range []int{1, 2, 3, 4} {
			t.Run(fmt.Sprintf("%s/tp %d", tc.name, size), func(t *testing.T) {
				logits := randn("logits", rows*vocab)
				for i := range logits {
					logits[i] *= tc.spread
				}
				var ref nn.CrossEntropy
				wantLoss, err := ref.Forward(nn.FromData(slices.Clone(logits), 2, rows/2, vocab), tc.targets)
				if err != nil {
					t.Fatal(err)
				}
				wantDx := slices.Clone(ref.Backward(scale).Data)

				got := runGroup(t, size, false, func(g *tp.Group) (ceResult, error) {
					c := tp.NewCrossEntropy(g, vocab)
					cols := []tp.Range{{Lo: c.Lo, Hi: c.Hi}}
					z := piece(logits, vocab, tp.Range{Lo: 0, Hi: rows}, cols)
					loss, err := c.Forward(nn.FromData(z, 2, rows/2, c.Hi-c.Lo), tc.targets)
					if err != nil {
						return ceResult{}, err
					}
					dx := c.Backward(scale)
					return ceResult{loss, place(dx.Data, rows, vocab, tp.Range{Lo: 0, Hi: rows}, cols)}, nil
				})
				if t.Failed() {
					return
				}
				dxs := make([][]float32, len(got))
				for r, res := range got {
					if res.loss != got[0].loss && !(isNaN(res.loss) && isNaN(got[0].loss)) {
						t.Errorf("rank %d: loss %v, rank 0 %v: every rank must see the same loss", r, res.loss, got[0].loss)
					}
					dxs[r] = res.dx
				}
				if isNaN(wantLoss) != isNaN(got[0].loss) {
					t.Errorf("loss %v, nn's %v", got[0].loss, wantLoss)
				} else if !isNaN(wantLoss) {
					checkNear(t, "loss", []float32{got[0].loss}, []float32{wantLoss})
				}
				checkNear(t, "logits' gradient", merge(t, "logits' gradient", dxs), wantDx)
			})
		}
	}
}

// TestCrossEntropyErrors checks that bad targets and logits fail Forward
// before any collective, on every rank alike.
func TestCrossEntropyErrors(t *testing.T) {
	cases := []struct {
		name    string
		rows    int
		cols    int // added to the rank's block
		targets []int32
		want    error
	}{
		{"too few targets", 4, 0, []int32{1, 2, 3}, nn.ErrShape},
		{"too many targets", 2, 0, []int32{1, 2, 3}, nn.ErrShape},
		{"target of vocab", 3, 0, []int32{1, 10, 3}, nn.ErrIndex},
		{"logits of another block", 3, 1, []int32{1, 2, 3}, nn.ErrShape},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			runGroup(t, 3, false, func(g *tp.Group) (struct{}, error) {
				c := tp.NewCrossEntropy(g, 10)
				v := c.Hi - c.Lo + tc.cols
				if _, err := c.Forward(nn.NewTensor(tc.rows, v), tc.targets); !errors.Is(err, tc.want) {
					return struct{}{}, fmt.Errorf("Forward: %v, want an error wrapping %v", err, tc.want)
				}
				// No collective was made: a good pass runs next.
				_, err := c.Forward(nn.NewTensor(3, c.Hi-c.Lo), []int32{0, 9, -1})
				return struct{}{}, err
			})
		})
	}
}

func isNaN(x float32) bool { return x != x }
