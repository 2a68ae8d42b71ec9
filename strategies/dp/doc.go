// Package dp is distributed data parallelism (PyTorch's
// DistributedDataParallel) over any communicator.
//
// Every rank holds the whole model. New broadcasts rank 0's parameters;
// each step every rank runs forward and backward on its slice of the
// global batch, and the gradients are averaged across ranks in buckets:
// contiguous ranges of the model's flat gradient buffer, taken in the
// order backward produces them (the last layer's first), at most
// BucketCap bytes each and a smaller first one so that communication
// starts early. A bucket's all-reduce is issued (prims.IAllReduce, on the
// driver's own duplicate of the communicator) the moment backward reports
// its last parameter ready, and runs while the layers below compute; Wait
// finishes the rest. The reduction runs in place on the flat buffer: no
// bucket is copied.
//
// Buckets are issued strictly in bucket order, so every rank issues the
// same collectives in the same order even if its layers report in another.
// A parameter that backward never reports is an error that names it; the
// buckets it held are still reduced, so that the other ranks do not hang.
//
// Gradient accumulation: NoSync runs micro-steps whose gradients stay
// local; the first Backward outside it reduces the sum.
//
// A Hook reduces a bucket: the default all-reduces it and divides by the
// number of ranks; gradient compressors plug in here.
package dp
