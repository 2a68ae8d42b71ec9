package render

// The trace events Timeline writes.
type (
	metaEvent struct {
		Name string `json:"name"`
		Ph   string `json:"ph"`
		Pid  int    `json:"pid"`
		Tid  int    `json:"tid"`
		Args any    `json:"args"`
	}
	sliceEvent struct {
		Name string  `json:"name"`
		Cat  string  `json:"cat"`
		Ph   string  `json:"ph"`
		Ts   float64 `json:"ts"`
		Dur  float64 `json:"dur"`
		Pid  int     `json:"pid"`
		Tid  int     `json:"tid"`
		Args any     `json:"args,omitempty"`
	}
	flowEvent struct {
		Name string  `json:"name"`
		Cat  string  `json:"cat"`
		Ph   string  `json:"ph"`
		ID   uint32  `json:"id"`
		Ts   float64 `json:"ts"`
		Pid  int     `json:"pid"`
		Tid  int     `json:"tid"`
		BP   string  `json:"bp,omitempty"`
	}
	counterEvent struct {
		Name string    `json:"name"`
		Ph   string    `json:"ph"`
		Ts   float64   `json:"ts"`
		Pid  int       `json:"pid"`
		Tid  int       `json:"tid"`
		Args heapValue `json:"args"`
	}
	heapValue struct {
		Bytes int64 `json:"bytes"`
	}
	nameArg struct {
		Name string `json:"name"`
	}
	sortArg struct {
		SortIndex int `json:"sort_index"`
	}
	p2pArgs struct {
		Bytes  int64  `json:"bytes"`
		Peer   int32  `json:"peer"`
		Tag    int32  `json:"tag"`
		Comm   uint32 `json:"comm"`
		For    string `json:"for,omitempty"` // a wait's: send or recv
		Site   string `json:"site,omitempty"`
		Failed bool   `json:"failed,omitempty"`
	}
	collArgs struct {
		Bytes       int64   `json:"bytes"`
		Comm        uint32  `json:"comm"`
		Seq         uint64  `json:"seq"`
		Algo        string  `json:"algo,omitempty"`
		Site        string  `json:"site,omitempty"`
		PredictedUS float64 `json:"predicted_us,omitempty"`
		Failed      bool    `json:"failed,omitempty"`
	}
)
