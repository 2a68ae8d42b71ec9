package compress

import (
	"fmt"
	"strconv"
	"strings"
)

// Names lists the codecs Parse knows, with their parameters and what a
// parameter left out means, for help texts and messages.
const Names = "fp16, bf16, topk[:FRACTION] (default 0.01), randk[:FRACTION] (default 0.01), sign, qsgd[:LEVELS] (default 16), powersgd[:RANK] (default 4); " +
	"+s2, +zstd or +auto after topk, sign or qsgd adds a lossless stage"

// Parse returns the codec that spec names, as --compress takes it:
// "fp16", "bf16", "topk:0.01" (the fraction of each bucket's elements
// sent), "randk:0.01", "sign", "qsgd:16" (levels), "powersgd:4" (rank);
// "" and "none" return nil, no compression. A parameter left out is the
// one these examples give ("topk" is "topk:0.01"), as Names says. A suffix "+s2", "+zstd"
// or "+auto" adds a lossless stage (WithLossless) to topk, sign or qsgd. seed draws the random
// choices (random-k's indices, QSGD's rounding, PowerSGD's first
// factors): every rank passes the same.
func Parse(spec string, seed uint64) (Codec, error) {
	if codec, stage, ok := strings.Cut(spec, "+"); ok {
		if stage == "" {
			return nil, fmt.Errorf("compress %q: no lossless stage after the +: pass +s2, +zstd or +auto (as in topk:0.01+s2), or drop the +", spec)
		}
		c, err := Parse(codec, seed)
		if err != nil {
			return nil, err
		}
		if c == nil {
			return nil, fmt.Errorf("compress %q: a lossless stage needs a codec before it, such as topk:0.01+%s", spec, stage)
		}
		return WithLossless(c, Lossless(stage))
	}
	name, param, has := strings.Cut(spec, ":")
	num := func(what string, def float64) (float64, error) {
		if !has {
			return def, nil
		}
		v, err := strconv.ParseFloat(param, 64)
		if err != nil {
			return 0, fmt.Errorf("compress %q: %s %q is not a number: pass %s:%s", spec, what, param, name, what)
		}
		return v, nil
	}
	plain := func(c Codec) (Codec, error) {
		if has {
			return nil, fmt.Errorf("compress %q: %s takes no parameter: pass %s", spec, name, name)
		}
		return c, nil
	}
	switch name {
	case "", "none":
		return plain(nil)
	case "fp16":
		return plain(NewFP16())
	case "bf16":
		return plain(NewBF16())
	case "sign":
		return plain(NewSign())
	case "topk", "randk":
		f, err := num("FRACTION", 0.01)
		if err != nil {
			return nil, err
		}
		if name == "topk" {
			return NewTopK(f)
		}
		return NewRandomK(f, seed)
	case "qsgd":
		l, err := num("LEVELS", 16)
		if err != nil {
			return nil, err
		}
		if l != float64(int(l)) {
			return nil, fmt.Errorf("compress %q: levels %v: pass a whole number", spec, l)
		}
		return NewQSGD(int(l), seed)
	case "powersgd":
		r, err := num("RANK", 4)
		if err != nil {
			return nil, err
		}
		if r != float64(int(r)) {
			return nil, fmt.Errorf("compress %q: rank %v: pass a whole number", spec, r)
		}
		return NewPowerSGD(PowerSGDConfig{Rank: int(r), Seed: seed})
	}
	return nil, fmt.Errorf("compress %q: no codec of that name: pick one of %s, or none", spec, Names)
}
