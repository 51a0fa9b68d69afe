"""What a written SavedModel is, read back from disk: its size, its XLA-marked functions and the
model-server flags they need (the model card and push's export facts use these)."""
from __future__ import annotations

from pathlib import Path

from pipeline.contracts import serving


def export_size(export_dir: Path) -> dict[str, float]:
    """What the export weighs on disk (the model card reports it): all of it, and the variables."""
    def mib(paths) -> float:
        return round(sum(p.stat().st_size for p in paths if p.is_file()) / 2**20, 2)

    root = Path(export_dir)
    return {"total_mib": mib(root.rglob("*")), "variables_mib": mib((root / "variables").glob("*"))}


def read_saved_model_proto(export_dir: Path):
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((Path(export_dir) / "saved_model.pb").read_bytes())
    return proto


def xla_compiled_functions(export_dir: Path) -> list[str]:
    """Names of the SavedModel's functions marked for XLA (`jit_compile=True`)."""
    return sorted({fn.signature.name for graph in read_saved_model_proto(export_dir).meta_graphs
                   for fn in graph.graph_def.library.function if fn.attr["_XlaMustCompile"].b})


def tf_serving_flags(export_dir: Path) -> list[str]:
    """The model-server flags this export needs (serving.XLA_SERVING_FLAG for XLA-marked functions)."""
    return [serving.XLA_SERVING_FLAG] if xla_compiled_functions(export_dir) else []
