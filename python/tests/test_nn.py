"""test_nn.py — tg.nn layers, optimizers and state files against PyTorch 1.13 (same weights, same
inputs; optimizer trajectories over several steps)."""
import numpy as np
import pytest
import torch

import tg
from tg import Tensor, nn
from tg.nn.state import get_parameters, get_state_dict, safe_save, safe_load, load_state_dict
from helpers import close, inputs


def _t(x):
    return torch.tensor(x.numpy(), requires_grad=True)


def test_linear_matches_torch_and_init_bounds():
    tg.Tensor.manual_seed(0)
    l = nn.Linear(6, 4)
    assert l.weight.shape == (4, 6) and l.bias.shape == (4,) and l.weight.requires_grad
    assert np.abs(l.weight.numpy()).max() <= 1 / np.sqrt(6) + 1e-6
    tl = torch.nn.Linear(6, 4)
    with torch.no_grad():
        tl.weight.copy_(torch.tensor(l.weight.numpy()))
        tl.bias.copy_(torch.tensor(l.bias.numpy()))
    x = inputs([(3, 6)])[0]
    close(l(Tensor(x)).numpy(), tl(torch.tensor(x)), 1e-5, 1e-5)
    l(Tensor(x)).sum().backward()
    tl(torch.tensor(x)).sum().backward()
    close(l.weight.grad.numpy(), tl.weight.grad, 1e-5, 1e-5)
    close(l.bias.grad.numpy(), tl.bias.grad, 1e-5, 1e-5)
    assert nn.Linear(3, 2, bias=False).bias is None


@pytest.mark.parametrize("kw", [{}, {"stride": 2, "padding": 1}, {"groups": 2, "dilation": 2}])
def test_conv2d_layer(kw):
    c = nn.Conv2d(4, 6, 3, **kw)
    tc = torch.nn.Conv2d(4, 6, 3, **kw)
    with torch.no_grad():
        tc.weight.copy_(torch.tensor(c.weight.numpy()))
        tc.bias.copy_(torch.tensor(c.bias.numpy()))
    x = inputs([(2, 4, 9, 9)])[0]
    close(c(Tensor(x)).numpy(), tc(torch.tensor(x)), 1e-5, 1e-4)


def test_batchnorm_training_and_eval():
    bn, tbn = nn.BatchNorm2d(3), torch.nn.BatchNorm2d(3)
    x = inputs([(4, 3, 5, 5)], low=-1, high=3)[0]
    with Tensor.train():
        y = bn(Tensor(x))
        y.realize()
    tbn.train()
    close(y.numpy(), tbn(torch.tensor(x)), 1e-5, 1e-4)
    close(bn.running_mean.numpy(), tbn.running_mean, 1e-6, 1e-5)
    close(bn.running_var.numpy(), tbn.running_var, 1e-6, 1e-5)
    assert bn.num_batches_tracked.item() == 1
    tbn.eval()
    close(bn(Tensor(x)).numpy(), tbn(torch.tensor(x)), 1e-5, 1e-4)
    sd = get_state_dict(bn)
    assert sorted(sd) == ["bias", "num_batches_tracked", "running_mean", "running_var", "weight"]


def test_layernorm_groupnorm_rmsnorm_embedding():
    ln, tln = nn.LayerNorm(5), torch.nn.LayerNorm(5)
    x = inputs([(2, 3, 5)])[0]
    close(ln(Tensor(x)).numpy(), tln(torch.tensor(x)), 1e-5, 1e-4)
    gn, tgn = nn.GroupNorm(2, 4), torch.nn.GroupNorm(2, 4)
    x4 = inputs([(2, 4, 3, 3)])[0]
    close(gn(Tensor(x4)).numpy(), tgn(torch.tensor(x4)), 1e-5, 1e-4)
    rn = nn.RMSNorm(5)
    close(rn(Tensor(x)).numpy(), x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6), 1e-5, 1e-4)
    e = nn.Embedding(10, 4)
    idx = np.array([[1, 9], [0, 1]], np.int32)
    close(e(Tensor(idx)).numpy(), e.weight.numpy()[idx], 0, 0)
    (g,) = e(Tensor(idx)).sum().gradient(e.weight)
    want = np.zeros((10, 4), np.float32)
    np.add.at(want, idx.ravel(), 1)
    close(g.numpy(), want, 0, 0)


def _torch_opt(name, params, **kw):
    return {"SGD": torch.optim.SGD, "Adam": torch.optim.Adam, "AdamW": torch.optim.AdamW}[name](params, **kw)


@pytest.mark.parametrize("name,kw,tkw", [
    ("SGD", {"lr": 0.1}, {"lr": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01},
     {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    ("Adam", {"lr": 0.01}, {"lr": 0.01}),
    ("AdamW", {"lr": 0.01, "weight_decay": 0.1}, {"lr": 0.01, "weight_decay": 0.1}),
])
def test_optimizers_follow_torch(name, kw, tkw):
    w0, x = inputs([(4, 3), (5, 4)])
    w = Tensor(w0, requires_grad=True).realize()
    tw = torch.tensor(w0, requires_grad=True)
    opt, topt = getattr(nn.optim, name)([w], **kw), _torch_opt(name, [tw], **tkw)
    for _ in range(5):
        opt.zero_grad()
        loss = (Tensor(x) @ w).tanh().square().mean()
        loss.backward()
        loss.realize(*opt.schedule_step())
        topt.zero_grad()
        tloss = (torch.tensor(x) @ tw).tanh().square().mean()
        tloss.backward()
        topt.step()
        close(loss.numpy(), tloss, 1e-6, 1e-5)
    close(w.numpy(), tw, 1e-6, 1e-5)


def test_lamb_decreases_loss_and_lr_setter():
    Tensor.manual_seed(3)
    w = Tensor.randn(8, 4, requires_grad=True).realize()
    x = Tensor.randn(16, 8).realize()
    opt = nn.optim.LAMB([w], lr=0.05)
    losses = []
    for _ in range(20):
        loss = (x @ w).square().mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    opt.lr = 0.0
    before = w.numpy()
    (x @ w).square().mean().backward()
    opt.step()
    np.testing.assert_array_equal(w.numpy(), before)


class Model:
    def __init__(self):
        self.l1, self.bn, self.l2 = nn.Linear(3, 4), nn.BatchNorm(4), nn.Linear(4, 2)
        self.layers = [nn.Linear(2, 2)]


def test_state_dict_save_load(tmp_path):
    m = Model()
    sd = get_state_dict(m)
    assert list(sd)[:3] == ["l1.weight", "l1.bias", "bn.weight"] and "layers.0.weight" in sd
    assert len(get_parameters(m)) == len(sd)
    f = tmp_path / "m.safetensors"
    safe_save(sd, f)
    loaded = safe_load(f)
    assert sorted(loaded) == sorted(sd)
    for k in sd:
        np.testing.assert_array_equal(loaded[k].numpy(), sd[k].numpy())
        assert loaded[k].dtype is sd[k].dtype
    m2 = Model()
    load_state_dict(m2, loaded)
    np.testing.assert_array_equal(m2.l2.weight.numpy(), m.l2.weight.numpy())
    with pytest.raises(ValueError):
        load_state_dict(m2, {"l1.weight": Tensor.zeros(3, 3)}, strict=False)
    with pytest.raises(ValueError):
        load_state_dict(m2, {})


def test_datasets_mnist_shapes():
    xtr, ytr, xte, yte = nn.datasets.mnist()
    assert xtr.shape == (60000, 1, 28, 28) and ytr.shape == (60000,) and xte.shape == (10000, 1, 28, 28)
    assert xtr.dtype.name == "uint8" and 0 <= int(ytr[:100].max().item()) <= 9
