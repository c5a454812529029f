// Package trace opens profiler trace windows on an inference server and finds the trace
// files they produce.
//
// A Controller profiles one phase ("measured" or "warmup") of each case of a run: before the
// phase's first send it POSTs /start_profile, and it POSTs /stop_profile exactly once per
// window — when the phase ends, when the window's maximum duration elapses (the phase keeps
// running unprofiled), when the run is cancelled, or at once when the start's outcome is
// unknown. A rejected start (404, 405, 401, 403, 407) is never stopped. Each window ends in
// one artifact.TraceWindow record written to the controller's sink, listing the worker trace
// files (rank<N>.*.pt.trace.json[.gz], dp<D>_pp<P>_tp<T>_dcp<C>_ep<E>_rank<N>.*) that
// appeared in the trace directory during the window.
//
// The importer of those files (infer.iteration and activity records) is not part of this
// package yet.
package trace
