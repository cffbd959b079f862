"""tg.nn — tinygrad's layers: Linear, Conv2d, BatchNorm, LayerNorm, RMSNorm, GroupNorm, Embedding.

Parameters are made by the C layers' *_init (PyTorch's default initializers from tg's seeded
generator, realized one at a time, docs/optim.md) and then held as Tensor attributes, so
nn.state finds them by attribute name as in tinygrad; forwards are Tensor methods (the same C
calls as the C layers' forwards, hence the same graph and kernels as examples/mnist.c).
"""
from .._lib import ffi, lib, check
from ..tensor import Tensor, _w, _tuple
from . import optim, state, datasets  # noqa: F401


def _take(struct, *names):
    """Tensors of a C layer struct as Tensors (own references)."""
    return [None if getattr(struct, n) == ffi.NULL else _w(lib.tg_retain(getattr(struct, n))) for n in names]


class Linear:
    def __init__(self, in_features, out_features, bias=True):
        s = ffi.new("tg_linear *")
        check(lib.tg_linear_init(s, in_features, out_features, bias))
        self.weight, self.bias = _take(s, "weight", "bias")
        lib.tg_linear_free(s)

    def __call__(self, x):
        return x.linear(self.weight.transpose(), self.bias)


class Conv2d:
    """Conv2d(in, out, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True):
        kh, kw = _tuple(kernel_size, 2)
        s = ffi.new("tg_conv2d_layer *")
        check(lib.tg_conv2d_init(s, in_channels, out_channels, kh, kw, 1, 0, 1, groups, bias))
        self.weight, self.bias = _take(s, "weight", "bias")
        lib.tg_conv2d_free(s)
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups

    def __call__(self, x):
        return x.conv2d(self.weight, self.bias, self.groups, self.stride, self.dilation, self.padding)


class BatchNorm:
    """BatchNorm over axis 1 (N, C, ...); batch statistics while Tensor.training, running ones otherwise."""

    def __init__(self, sz, eps=1e-5, affine=True, track_running_stats=True, momentum=0.1):
        s = ffi.new("tg_batchnorm2d *")
        check(lib.tg_batchnorm2d_init(s, sz))
        self.weight, self.bias, self.running_mean, self.running_var, self.num_batches_tracked = _take(
            s, "weight", "bias", "running_mean", "running_var", "num_batches_tracked")
        lib.tg_batchnorm2d_free(s)
        if not affine:
            self.weight = self.bias = None
        if not track_running_stats:
            self.running_mean = self.running_var = None
        self.eps, self.momentum = eps, momentum

    def __call__(self, x):
        training = Tensor.training or self.running_mean is None
        y = _w(lib.tg_batchnorm(x._h, *[ffi.NULL if t is None else t._h for t in
                                        (self.weight, self.bias, self.running_mean, self.running_var)],
                                training, self.momentum, self.eps))
        if training and self.running_mean is not None:
            self.num_batches_tracked.assign(self.num_batches_tracked + 1)
        return y


BatchNorm2d = BatchNorm1d = BatchNorm3d = BatchNorm


class LayerNorm:
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True):
        self.normalized_shape = _tuple(normalized_shape, 1)
        self.eps = eps
        self.weight = Tensor.ones(self.normalized_shape, requires_grad=True) if elementwise_affine else None
        self.bias = Tensor.zeros(self.normalized_shape, requires_grad=True) if elementwise_affine else None
        for t in (self.weight, self.bias):
            if t is not None:
                t.realize()

    def __call__(self, x):
        return _w(lib.tg_layernorm(x._h, len(self.normalized_shape), ffi.NULL if self.weight is None else self.weight._h,
                                   ffi.NULL if self.bias is None else self.bias._h, self.eps))


class RMSNorm:
    def __init__(self, dim, eps=1e-6):
        self.eps, self.weight = eps, Tensor.ones(dim, requires_grad=True).realize()

    def __call__(self, x):
        return _w(lib.tg_rmsnorm(x._h, 1, self.weight._h, self.eps))


class GroupNorm:
    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True):
        self.num_groups, self.eps = num_groups, eps
        self.weight = Tensor.ones(num_channels, requires_grad=True).realize() if affine else None
        self.bias = Tensor.zeros(num_channels, requires_grad=True).realize() if affine else None

    def __call__(self, x):
        return _w(lib.tg_groupnorm(x._h, self.num_groups, ffi.NULL if self.weight is None else self.weight._h,
                                   ffi.NULL if self.bias is None else self.bias._h, self.eps))


class Embedding:
    def __init__(self, vocab_size, embed_size):
        s = ffi.new("tg_embedding *")
        check(lib.tg_embedding_init(s, vocab_size, embed_size))
        (self.weight,) = _take(s, "weight")
        lib.tg_embedding_free(s)
        self.vocab_sz, self.embed_sz = vocab_size, embed_size

    def __call__(self, idx):
        return self.weight.index_select(0, idx)
