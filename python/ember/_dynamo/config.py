"""torch._dynamo.config: settings scripts set before compiling. ember has no
compiler, so they are kept (and can be read back) but change nothing."""
capture_scalar_outputs = False
capture_dynamic_output_shape_ops = False
skip_fwd_side_effects_in_bwd_under_checkpoint = False
cache_size_limit = 8
recompile_limit = 8
accumulated_cache_size_limit = 256
suppress_errors = False
verbose = False
optimize_ddp = True
