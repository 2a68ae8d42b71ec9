// Package shardckpt saves and loads checkpoints sharded across the ranks of
// a job in which each rank holds contiguous element ranges of many tensors
// (ZeRO, FSDP), so that a checkpoint saved at one world size loads at any
// other: saved by 4 ranks, it loads on 2, 3 or 1, each asking for whatever
// ranges it now holds.
//
// # Saving and loading
//
// Each rank writes what it holds with WriteShard, one safetensors file per
// rank and save. Then one process, once every rank's WriteShard has
// returned, calls Commit, which makes the save the checkpoint by writing
// its index:
//
//	tag := fmt.Sprintf("step-%06d", step)
//	if _, err := shardckpt.WriteShard(dir, tag, rank, world, pieces); err != nil { ... }
//	barrier()
//	if rank == 0 {
//		err = shardckpt.Commit(dir, tag, world, map[string]string{"step": strconv.Itoa(step)})
//	}
//	barrier() // before the next save
//
// A loader opens the index and reads the ranges it needs; Read finds the
// shard files that hold them, whatever the world size of the save:
//
//	ix, err := shardckpt.Open(dir)
//	shape, _ := ix.Shape("h.0.attn.c_attn.weight")
//	p := shardckpt.Piece{Tensor: "h.0.attn.c_attn.weight", Shape: shape, Lo: lo, Hi: hi}
//	err = ix.Read(&p) // fills p.Data
//
// # Crash safety
//
// The index is the checkpoint: a save is part of it only once Commit has
// renamed the new index over the old one. The shard files of each save
// have names of their own (they hold its tag), so writing them changes
// nothing that the current index names, and Commit removes the old saves'
// files only after the new index is durable. A crash at any moment thus
// leaves dir with either the old checkpoint or the new one, each whole.
// Shard files of a save never committed, and the temporary files of writes
// cut short, are ignored by Open and Read and removed by the next Commit.
// Commit checksums every shard file and Read verifies each against the
// index before it uses it, so a damaged file is reported, not loaded.
//
// # Shard files
//
// Rank r of w writes "shard-<r+1>-of-<w>.<tag>.safetensors", the numbers of
// five digits at least: "shard-00001-of-00004.step-000100.safetensors". It
// is a safetensors file of F32 tensors. A piece that is a whole tensor is
// stored under the tensor's name and shape, so that Python's safetensors
// and Hugging Face's tools read it as any state dict; part [lo, hi) of a
// tensor is stored as a 1-D tensor of hi-lo elements under "name[lo:hi]".
// The file's metadata is
//
//	format        "pt", which transformers asks of the files it loads
//	shard_format  "gorun-shard-1"
//	tag, rank, world_size
//	              the save's tag, the rank (from 0) and the world size
//	pieces        a JSON list of the pieces it holds:
//	              [{"key":"wte.weight[0:100]","tensor":"wte.weight","shape":[50,4],"lo":0,"hi":100}, ...]
//
// # Index
//
// The index, model.safetensors.index.json, keeps the two keys of Hugging
// Face's index of a sharded checkpoint, metadata and weight_map, and adds
// three of its own:
//
//	{
//	  "metadata": {"format": "gorun-sharded-1", "world_size": "2", "total_size": "804", "step": "100"},
//	  "weight_map": {"scale": "shard-00001-of-00002.step-000100.safetensors",
//	                 "wte.weight": "shard-00001-of-00002.step-000100.safetensors"},
//	  "shapes": {"scale": [], "wte.weight": [50, 4]},
//	  "pieces": {
//	    "scale": [{"file": "shard-00001-of-00002.step-000100.safetensors", "key": "scale", "lo": 0, "hi": 1}],
//	    "wte.weight": [
//	      {"file": "shard-00001-of-00002.step-000100.safetensors", "key": "wte.weight[0:100]", "lo": 0, "hi": 100},
//	      {"file": "shard-00002-of-00002.step-000100.safetensors", "key": "wte.weight[100:200]", "lo": 100, "hi": 200}]},
//	  "files": {
//	    "shard-00001-of-00002.step-000100.safetensors": {"size": 1234, "sha256": "9f86d08..."},
//	    "shard-00002-of-00002.step-000100.safetensors": {"size": 1178, "sha256": "60303ae..."}}
//	}
//
// metadata holds strings: the caller's, and "format", "world_size" and
// "total_size", the tensors' size in bytes (Hugging Face writes the last
// as a number). weight_map maps each tensor to the first shard file that
// holds part of it, shapes gives its shape and pieces the element ranges
// [lo, hi) of it that each file holds under which key, sorted by lo and
// tiling [0, n) for a tensor of n elements. files gives each shard file's
// size in bytes and SHA-256 in lowercase hex. Tools that know only Hugging
// Face's index can load a checkpoint through weight_map where every tensor
// is whole in one file; a tensor split across files is found only through
// pieces.
package shardckpt
