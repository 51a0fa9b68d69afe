"""Pipeline steps: one package per step, each with a plain `run(config, paths) -> result`."""
