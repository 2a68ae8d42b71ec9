package gemm

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/blas"
)

// product is one Sgemm call to check against the float64 reference.
type product struct {
	tA, tB           blas.Transpose
	m, n, k          int
	alpha, beta      float32
	padA, padB, padC int  // leading dimensions past their minimum
	nanC             bool // fill C with NaNs (for a zero beta)
}

func (p product) String() string {
	return fmt.Sprintf("%c%c/%dx%dx%d/a%g/b%g/pad%d.%d.%d/nan%t",
		p.tA, p.tB, p.m, p.n, p.k, p.alpha, p.beta, p.padA, p.padB, p.padC, p.nanC)
}

// operands returns random A, B and C for p with their leading dimensions,
// C's padding (past column n) filled with a sentinel.
func (p product) operands(rng *rand.Rand) (a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	ar, ac := p.m, p.k
	if p.tA != blas.NoTrans {
		ar, ac = p.k, p.m
	}
	br, bc := p.k, p.n
	if p.tB != blas.NoTrans {
		br, bc = p.n, p.k
	}
	lda, ldb, ldc = max(1, ac)+p.padA, max(1, bc)+p.padB, max(1, p.n)+p.padC
	a, b, c = random(rng, ar*lda), random(rng, br*ldb), random(rng, p.m*ldc)
	for i := range p.m {
		for j := range ldc {
			switch {
			case j >= p.n:
				c[i*ldc+j] = sentinel
			case p.nanC:
				c[i*ldc+j] = float32(math.NaN())
			}
		}
	}
	return a, lda, b, ldb, c, ldc
}

const sentinel = -12345

func random(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = rng.Float32()*2 - 1
	}
	return s
}

// gemmFunc is Sgemm's signature.
type gemmFunc func(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)

// expected is a product's operands with the float64 reference's C and the
// tolerance of each of C's elements.
type expected struct {
	p             product
	a, b, c       []float32
	lda, ldb, ldc int
	want, tol     []float64
}

// expect draws p's operands and works out its product in float64, with a
// tolerance of float32's rounding of the sums' magnitudes.
func expect(p product) *expected {
	rng := rand.New(rand.NewPCG(uint64(p.m), uint64(p.n*1000+p.k)))
	e := &expected{p: p}
	e.a, e.lda, e.b, e.ldb, e.c, e.ldc = p.operands(rng)
	// The strides of op(A) and op(B) along their rows and columns.
	ai, al, bl, bj := e.lda, 1, e.ldb, 1
	if p.tA != blas.NoTrans {
		ai, al = 1, e.lda
	}
	if p.tB != blas.NoTrans {
		bl, bj = 1, e.ldb
	}
	alpha, beta := float64(p.alpha), float64(p.beta)
	e.want, e.tol = make([]float64, len(e.c)), make([]float64, len(e.c))
	for i := range p.m {
		for j := range p.n {
			var sum, mag float64
			for l := range p.k {
				x := float64(e.a[i*ai+l*al]) * float64(e.b[l*bl+j*bj])
				sum, mag = sum+x, mag+math.Abs(x)
			}
			want, tol := alpha*sum, 1e-5*math.Abs(alpha)*mag+1e-30
			if beta != 0 {
				c := float64(e.c[i*e.ldc+j])
				want, tol = want+beta*c, tol+1e-6*math.Abs(beta*c)
			}
			e.want[i*e.ldc+j], e.tol[i*e.ldc+j] = want, tol
		}
	}
	return e
}

// check runs the product through run, named name, on a copy of C and
// compares the result with the reference; C's padding must stay as it
// was.
func (e *expected) check(t *testing.T, name string, run gemmFunc) {
	t.Helper()
	p := e.p
	c := append([]float32(nil), e.c...)
	run(p.tA, p.tB, p.m, p.n, p.k, p.alpha, e.a, e.lda, e.b, e.ldb, p.beta, c, e.ldc)
	bad := 0
	for i := range p.m {
		for j := range e.ldc {
			got := c[i*e.ldc+j]
			if j >= p.n {
				if got != sentinel {
					t.Fatalf("%s %v: C[%d][%d] past column n = %g, want it untouched", name, p, i, j, got)
				}
				continue
			}
			want, tol := e.want[i*e.ldc+j], e.tol[i*e.ldc+j]
			if d := math.Abs(float64(got) - want); !(d <= tol) {
				if bad++; bad <= 3 {
					t.Errorf("%s %v: C[%d][%d] = %g, want %g (tolerance %g)", name, p, i, j, got, want, tol)
				}
			}
		}
	}
}

// check runs p through run and checks it against the reference.
func check(t *testing.T, p product, run gemmFunc) {
	t.Helper()
	expect(p).check(t, "", run)
}

var (
	transposes = []blas.Transpose{blas.NoTrans, blas.Trans, blas.ConjTrans}
	scalars    = []struct{ alpha, beta float32 }{{1, 0}, {1, 1}, {-0.5, 2.5}, {0, 0.5}, {0, 0}, {2, -1}}
	small      = []int{0, 1, 2, 3, 5, 7, 15, 16, 17}
	awkward    = []int{0, 1, 2, 3, 5, 7, 15, 16, 17, 31, 33, 63, 65, 100, 129, 257}
)

// products lists the checked products: every small shape in every
// transpose, awkward sizes rotated against each other, and a few shapes
// that cross the blocking.
func products() []product {
	var ps []product
	for _, tA := range transposes {
		for _, tB := range transposes {
			for _, m := range small {
				for _, n := range small {
					for ki, k := range []int{0, 1, 7, 17} {
						s := scalars[(m+n+ki)%len(scalars)]
						ps = append(ps, product{tA: tA, tB: tB, m: m, n: n, k: k, alpha: s.alpha, beta: s.beta,
							padA: m % 3, padB: n % 2, padC: k % 4, nanC: s.beta == 0})
					}
				}
			}
			for i, m := range awkward {
				n, k := awkward[(i+5)%len(awkward)], awkward[(i+11)%len(awkward)]
				s := scalars[i%len(scalars)]
				ps = append(ps, product{tA: tA, tB: tB, m: m, n: n, k: k, alpha: s.alpha, beta: s.beta,
					padA: i % 5, padB: (i + 1) % 3, padC: i % 2, nanC: s.beta == 0})
			}
		}
	}
	for _, tr := range [][2]blas.Transpose{{'N', 'N'}, {'T', 'N'}, {'N', 'T'}, {'T', 'T'}} {
		for _, s := range [][3]int{{65, 100, 800}, {300, 40, 33}, {13, 4200, 5}, {257, 257, 257}} {
			ps = append(ps, product{tA: tr[0], tB: tr[1], m: s[0], n: s[1], k: s[2], alpha: 0.75, beta: 0, nanC: true},
				product{tA: tr[0], tB: tr[1], m: s[0], n: s[1], k: s[2], alpha: 1, beta: 1, padC: 3})
		}
	}
	return ps
}

// archs are the ways products run in these tests: each of the CPU's
// vector archs and the Go kernels, each also with blocks so small that every
// product crosses several of them.
func archs() map[string]*arch {
	tiny := func(r arch) *arch {
		r.mc, r.kc, r.nc = 2*r.mr, 5, 3*r.nr
		return &r
	}
	as := map[string]*arch{"go": &goArch, "go-tiny": tiny(goArch)}
	for _, r := range vectorArchs {
		as[r.name], as[r.name+"-tiny"] = r, tiny(*r)
	}
	return as
}

// TestSgemm checks every product on every arch; the reference is worked
// out once a product.
func TestSgemm(t *testing.T) {
	as := archs()
	names := slices.Sorted(maps.Keys(as))
	for i, p := range products() {
		if testing.Short() && i%7 != 0 {
			continue
		}
		e := expect(p)
		for _, name := range names {
			r := as[name]
			e.check(t, name, func(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
				sgemm(r, tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
			})
		}
	}
}

// TestDispatch runs Sgemm itself with the vector kernels on and off.
func TestDispatch(t *testing.T) {
	defer func(v bool) { useVector = v }(useVector)
	for _, vec := range []bool{true, false} {
		useVector = vec
		want := "go"
		if vec && len(vectorArchs) > 0 {
			want = vectorArchs[0].name
		}
		if Arch() != want {
			t.Fatalf("useVector %t: Arch() = %q, want %q", vec, Arch(), want)
		}
		for _, tr := range [][2]blas.Transpose{{'N', 'N'}, {'T', 'N'}, {'N', 'T'}, {'T', 'T'}} {
			check(t, product{tA: tr[0], tB: tr[1], m: 64, n: 100, k: 79, alpha: 1, beta: 0, nanC: true}, Sgemm)
			check(t, product{tA: tr[0], tB: tr[1], m: 31, n: 17, k: 400, alpha: -1, beta: 1, padA: 1, padB: 2, padC: 3}, Sgemm)
		}
	}
}
