"""torch.distributed._composable: only its fsdp entry point (fully_shard, see ..fsdp)."""
