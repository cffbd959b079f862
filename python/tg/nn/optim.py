"""tg.nn.optim — SGD, Adam, AdamW, LAMB over tg's optimizers (src/nn/optim.c, docs/optim.md).

The update runs in C: step() realizes the new parameters and the optimizer state in one
schedule; `loss.realize(*opt.schedule_step())` puts the loss in that schedule too (one realize
per training step, like examples/mnist.c). Learning rates live in device buffers, so changing
`opt.lr` recompiles nothing.
"""
from .._lib import ffi, lib, check, error
from ..tensor import Tensor, _OptimizerStep


class Optimizer:
    def __init__(self, params, lr, make):
        self.params = [p for p in params if p.requires_grad]
        if not self.params:
            raise ValueError("tg: optimizer got no parameters that require grad")
        self._lr = lr
        self._o = make([p._h for p in self.params], len(self.params))
        if self._o == ffi.NULL:
            raise error()

    def __del__(self):
        try:
            lib.tg_optimizer_free(self._o)
        except (AttributeError, TypeError):
            pass

    @property
    def lr(self):
        return self._lr

    @lr.setter
    def lr(self, v):
        v = float(v.item() if isinstance(v, Tensor) else v)
        check(lib.tg_optimizer_set_lr(self._o, v))
        self._lr = v

    def zero_grad(self):
        lib.tg_optimizer_zero_grad(self._o)

    def _step(self, also, n):
        check(lib.tg_optimizer_step(self._o, also, n))

    def step(self):
        self._step(ffi.NULL, 0)

    def schedule_step(self):
        """tinygrad's: what Tensor.realize(*...) takes to run this step in its schedule."""
        return [_OptimizerStep(self)]


class SGD(Optimizer):
    def __init__(self, params, lr=0.001, momentum=0.0, weight_decay=0.0, nesterov=False, classic=False):
        super().__init__(params, lr, lambda ps, n: lib.tg_sgd(ps, n, lr, momentum, weight_decay, nesterov))


class Adam(Optimizer):
    def __init__(self, params, lr=0.001, b1=0.9, b2=0.999, eps=1e-8):
        super().__init__(params, lr, lambda ps, n: lib.tg_adam(ps, n, lr, b1, b2, eps))


class AdamW(Optimizer):
    def __init__(self, params, lr=0.001, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.01):
        super().__init__(params, lr, lambda ps, n: lib.tg_adamw(ps, n, lr, b1, b2, eps, weight_decay))


class LAMB(Optimizer):
    def __init__(self, params, lr=0.001, b1=0.9, b2=0.999, eps=1e-6, weight_decay=0.0):
        super().__init__(params, lr, lambda ps, n: lib.tg_lamb(ps, n, lr, b1, b2, eps, weight_decay))
