"""The Kubernetes backend's own CLI: the RBAC objects the launcher pod needs, as YAML."""
from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """The k8s CLI, `python -m components.train.k8s rbac [--config F]`: the RBAC objects, as YAML."""
    import argparse
    import sys

    from pipeline.cli import load_args_config

    parser = argparse.ArgumentParser(prog="python -m components.train.k8s", description=main.__doc__)
    parser.add_argument("what", choices=["rbac"])
    parser.add_argument("--config", help="params file (default: $RECO_CONFIG or conf/params.yaml)")
    args = parser.parse_args(argv)
    args.overrides_json, args.set = "{}", []
    from components.train.k8s.client import rbac
    from components.train.k8s.manifests import to_yaml

    sys.stdout.write(to_yaml(rbac(load_args_config(args))))
    return 0

