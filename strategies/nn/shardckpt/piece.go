package shardckpt

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
)

// Piece is the elements [Lo, Hi) of one tensor, flattened in row-major
// order: what one rank holds of it, or what a loader asks for.
type Piece struct {
	// Tensor is the tensor's name, such as "h.0.attn.c_attn.weight" or
	// "optim.exp_avg.h.0.attn.c_attn.weight".
	Tensor string
	// Shape is the whole tensor's shape; an empty Shape is a scalar, which
	// has one element.
	Shape []int
	// Lo and Hi bound the range of elements within the whole tensor.
	Lo, Hi int
	// Data holds the Hi-Lo elements.
	Data []float32
}

// String names the piece as its key in a shard file does: "wte.weight[0:64]".
func (p *Piece) String() string { return partKey(p.Tensor, p.Lo, p.Hi) }

// check validates a piece to be written and returns its tensor's number of
// elements.
func (p *Piece) check() (int, error) {
	n, ok := numel(p.Shape)
	switch {
	case p.Tensor == "":
		return 0, fmt.Errorf("piece %s has no tensor name", p)
	case !ok:
		return 0, fmt.Errorf("piece %s: shape %v is negative or too large", p, p.Shape)
	case p.Lo < 0 || p.Lo > p.Hi || p.Hi > n:
		return 0, fmt.Errorf("piece %s: range [%d, %d) is not within the %d elements of shape %v",
			p, p.Lo, p.Hi, n, p.Shape)
	case len(p.Data) != p.Hi-p.Lo:
		return 0, fmt.Errorf("piece %s: %d values of data for %d elements", p, len(p.Data), p.Hi-p.Lo)
	}
	return n, nil
}

// numel returns the number of elements of a tensor of the given shape, and
// false if a dimension is negative or the tensor's size in bytes as F32
// overflows an int.
func numel(shape []int) (int, bool) {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return 0, false
		}
		if d != 0 && n > math.MaxInt/4/d {
			return 0, false
		}
		n *= d
	}
	return n, true
}

// partKey is the key under which a shard file holds part [lo, hi) of
// tensor: "name[lo:hi]".
func partKey(tensor string, lo, hi int) string {
	return tensor + "[" + strconv.Itoa(lo) + ":" + strconv.Itoa(hi) + "]"
}

// shardPrefix begins the name of every shard file.
const shardPrefix = "shard-"

// shardName is the name of rank's shard file of the save tagged tag.
func shardName(tag string, rank, world int) string {
	return fmt.Sprintf("%s%05d-of-%05d.%s.safetensors", shardPrefix, rank+1, world, tag)
}

var (
	tagRE   = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	shardRE = regexp.MustCompile(`^shard-([0-9]{5,9})-of-([0-9]{5,9})\.(.+)\.safetensors$`)
)

// checkTag checks that tag can name a save.
func checkTag(tag string) error {
	if !tagRE.MatchString(tag) {
		return fmt.Errorf("tag %q is not 1 to 128 letters, digits, '_', '-' and '.', beginning with no '.' or '-'", tag)
	}
	return nil
}

// parseShardName returns the rank (from 0), world size and tag of the shard
// file called name, and false if name is not one that shardName makes.
func parseShardName(name string) (rank, world int, tag string, ok bool) {
	m := shardRE.FindStringSubmatch(name)
	if m == nil {
		return 0, 0, "", false
	}
	r, _ := strconv.Atoi(m[1]) // nine digits at most: no error
	w, _ := strconv.Atoi(m[2])
	if r < 1 || r > w || checkTag(m[3]) != nil || shardName(m[3], r-1, w) != name {
		return 0, 0, "", false
	}
	return r - 1, w, m[3], true
}
