"""beautiful_mnist.py — tinygrad's beautiful_mnist on tg: the network of examples/mnist.c, trained on
Fashion-MNIST with Adam (batch 512, cosine learning rate from 3e-3), one realize per step.

    PYTHONPATH=python python3 python/examples/beautiful_mnist.py [--steps 600] [--batch 512] [--lr 3e-3]

Batches are drawn on the host (numpy), as examples/mnist.c's loader does: tg's index_select is a
compare-and-sum over the rows, which is right for an embedding table but not for 60,000 images.
"""
import argparse
import math
import time

import numpy as np

from tg import Tensor, nn


class Model:
    def __init__(self):
        self.layers = [
            nn.Conv2d(1, 32, 5), Tensor.relu,
            nn.Conv2d(32, 32, 5), Tensor.relu,
            nn.BatchNorm(32), Tensor.max_pool2d,
            nn.Conv2d(32, 64, 3), Tensor.relu,
            nn.Conv2d(64, 64, 3), Tensor.relu,
            nn.BatchNorm(64), Tensor.max_pool2d,
            lambda x: x.flatten(1), nn.Linear(576, 10)]

    def __call__(self, x):
        return x.sequential(self.layers)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    X_train, Y_train, X_test, Y_test = [t.numpy() for t in nn.datasets.mnist()]
    Tensor.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    model = Model()
    opt = nn.optim.Adam(nn.state.get_parameters(model), lr=args.lr)

    def train_step(step):
        opt.lr = args.lr * 0.5 * (1 + math.cos(math.pi * step / args.steps))  # a buffer: nothing recompiles
        samples = rng.integers(0, X_train.shape[0], args.batch)
        x = Tensor(X_train[samples].astype(np.float32) / 255)
        y = Tensor(Y_train[samples].astype(np.int32))
        loss = model(x).sparse_categorical_crossentropy(y).backward()
        return loss.realize(*opt.schedule_step())  # forward, backward and Adam: one schedule

    with Tensor.train():
        t0 = time.perf_counter()
        for step in range(args.steps):
            loss = train_step(step)
            if step % 25 == 0 or step == args.steps - 1:
                dt = time.perf_counter() - t0
                print("step %4d/%d loss %.4f  %.0f ms/step" % (step + 1, args.steps, loss.item(),
                                                               1000 * dt / (step + 1)), flush=True)
        total = time.perf_counter() - t0
    print("trained %d steps in %.1f s (%.1f ms/step)" % (args.steps, total, 1000 * total / max(args.steps, 1)))

    correct = 0
    for i in range(0, X_test.shape[0], 1000):
        pred = model(Tensor(X_test[i:i + 1000].astype(np.float32) / 255)).argmax(axis=1)
        correct += int((pred == Tensor(Y_test[i:i + 1000].astype(np.int32))).sum().item())
    print("test accuracy: %.2f%%" % (100 * correct / X_test.shape[0]))


if __name__ == "__main__":
    main()
