"""tg.nn.state — tinygrad's get_state_dict / get_parameters / safe_save / safe_load /
load_state_dict, over tg's safetensors reader and writer (src/io, docs/io.md)."""
from .._lib import ffi, lib, check
from ..tensor import Tensor, _w


def get_state_dict(obj, prefix="", tensor_type=Tensor):
    """Every Tensor reachable through attributes, lists, tuples and dicts, by dotted name."""
    if isinstance(obj, tensor_type):
        return {prefix.strip("."): obj}
    if hasattr(obj, "_asdict"):
        return get_state_dict(obj._asdict(), prefix, tensor_type)
    if isinstance(obj, (list, tuple)):
        items = [(str(i), v) for i, v in enumerate(obj)]
    elif isinstance(obj, dict):
        items = list(obj.items())
    elif hasattr(obj, "__dict__"):
        items = list(obj.__dict__.items())
    else:
        return {}
    out = {}
    for k, v in items:
        out.update(get_state_dict(v, prefix + str(k) + ".", tensor_type))
    return out


def get_parameters(obj):
    return list(get_state_dict(obj).values())


def _c_dict(tensors):
    sd = ffi.new("tg_state_dict *")
    try:
        for k, t in tensors.items():
            check(lib.tg_state_dict_add(sd, k.encode(), t._h))
    except Exception:
        lib.tg_state_dict_free(sd)
        raise
    return sd


def safe_save(tensors, fn, metadata=None):
    sd = _c_dict(tensors)
    try:
        check(lib.tg_safetensors_save(str(fn).encode(), sd))
    finally:
        lib.tg_state_dict_free(sd)


def safe_load(fn):
    """A dict name → Tensor of every tensor in a safetensors file."""
    sd = ffi.new("tg_state_dict *")
    try:
        check(lib.tg_safetensors_read(str(fn).encode(), sd))
        return {ffi.string(sd.names[i]).decode(): _w(lib.tg_retain(sd.tensors[i])) for i in range(sd.n)}
    finally:
        lib.tg_state_dict_free(sd)


def load_state_dict(model, state_dict, strict=True, verbose=False):
    """Copy state_dict's values into model's tensors (tinygrad: assign, realized at once)."""
    model_state = get_state_dict(model)
    missing = [k for k in model_state if k not in state_dict]
    if strict and missing:
        raise ValueError("tg: load_state_dict: missing %s" % ", ".join(missing))
    targets = []
    for k, v in model_state.items():
        if k in state_dict:
            src = state_dict[k]
            if src.shape != v.shape:
                raise ValueError("tg: load_state_dict: %s has shape %s, the model %s" % (k, src.shape, v.shape))
            targets.append(v.assign(src.to(v.device).cast(v.dtype)))
    if targets:
        targets[0].realize(*targets[1:])
