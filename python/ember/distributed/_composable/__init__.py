"""torch.distributed._composable: only its fsdp entry point, not available in ember (see ..fsdp)."""
