"""gen_fixtures.py — writes the ONNX files of tests/test_onnx.c (tests/fixtures/onnx/) and the
seed corpus of tests/fuzz/fuzz_onnx.c (tests/fuzz/corpus/onnx/): small valid models and
hostile ones (truncated, garbage, huge dims, a cycle, a missing initializer, a wrong dtype, an
unsupported op or attribute, external data inside and outside the model's directory).

Needs the `onnx` package (pip install onnx into a venv); the files are committed, so the
test suite does not. Run from the repository root: python3 tests/onnx/gen_fixtures.py
"""
import os
import shutil

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FIX = "tests/fixtures/onnx"
CORPUS = "tests/fuzz/corpus/onnx"
F = TensorProto.FLOAT


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def write(name, data):
    with open(os.path.join(FIX, name), "wb") as f:
        f.write(data)


def main():
    os.makedirs(FIX, exist_ok=True)
    os.makedirs(CORPUS, exist_ok=True)
    w = numpy_helper.from_array(np.array([[1, 2, 3], [4, 5, 6]], np.float32), "W")
    # Y = Relu(X + W) - 1 and Z = Gemm(X, W^T): two outputs, one free input
    add = model([helper.make_node("Add", ["X", "W"], ["S"]), helper.make_node("Relu", ["S"], ["R"]),
                 helper.make_node("Sub", ["R", "one"], ["Y"]),
                 helper.make_node("Gemm", ["X", "W"], ["Z"], transB=1)],
                [vi("X", [2, 3])], [vi("Y", [2, 3]), vi("Z", [2, 2])],
                [w, numpy_helper.from_array(np.array(1, np.float32), "one")])
    good = add.SerializeToString()
    write("add_relu.onnx", good)
    write("truncated.onnx", good[: len(good) // 2])
    write("garbage.onnx", b"\xff\xfe this is not a protobuf \x00\x01\x02" * 4)
    for name, dims in (("huge_dims.onnx", [1 << 30, 1 << 20]), ("dims_overflow.onnx", [1 << 40, 1 << 40])):
        huge = numpy_helper.from_array(np.zeros(1, np.float32), "W")
        del huge.dims[:]
        huge.dims.extend(dims)
        write(name, model([helper.make_node("Add", ["X", "W"], ["Y"])], [vi("X", [1])], [vi("Y", [1])],
                          [huge]).SerializeToString())
    write("cycle.onnx", model([helper.make_node("Add", ["X", "B"], ["A"]), helper.make_node("Relu", ["A"], ["B"])],
                              [vi("X", [1])], [vi("A", [1])]).SerializeToString())
    write("missing_init.onnx", model([helper.make_node("Add", ["X", "W"], ["Y"])], [vi("X", [2, 3])],
                                     [vi("Y", [2, 3])]).SerializeToString())
    bad = helper.make_tensor("W", F, [2, 3], [1, 2, 3, 4, 5, 6])
    bad.data_type = 99
    write("wrong_dtype.onnx", model([helper.make_node("Add", ["X", "W"], ["Y"])], [vi("X", [2, 3])], [vi("Y", [2, 3])],
                                    [bad]).SerializeToString())
    short = numpy_helper.from_array(np.zeros(5, np.float32), "W")
    del short.dims[:]
    short.dims.extend([2, 3])
    write("short_data.onnx", model([helper.make_node("Add", ["X", "W"], ["Y"])], [vi("X", [2, 3])],
                                   [vi("Y", [2, 3])], [short]).SerializeToString())
    write("unsupported_op.onnx", model([helper.make_node("FancyOp", ["X"], ["Y"])], [vi("X", [2])],
                                       [vi("Y", [2])]).SerializeToString())
    write("unsupported_attr.onnx", model([helper.make_node("Relu", ["X"], ["Y"], shininess=3)], [vi("X", [2])],
                                         [vi("Y", [2])]).SerializeToString())
    # a Split with no outputs (once a division by zero) and a graph whose output is its input
    write("split_no_outputs.onnx", model([helper.make_node("Split", ["X"], [])], [vi("X", [2])],
                                         [vi("X", [2])]).SerializeToString())
    write("twice.onnx", model([helper.make_node("Relu", ["X"], ["Y"]), helper.make_node("Abs", ["X"], ["Y"])],
                              [vi("X", [2])], [vi("Y", [2])]).SerializeToString())
    # external data: W's 24 bytes at offset 8 of a file beside the model; and one pointing outside
    ext = TensorProto(name="W", data_type=F, dims=[2, 3])
    ext.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "ext_weights.bin"), ("offset", "8"), ("length", "24")):
        e = ext.external_data.add()
        e.key, e.value = k, v
    write("ext_weights.bin", b"\0" * 8 + np.array([1, 2, 3, 4, 5, 6], np.float32).tobytes())
    write("external.onnx", model([helper.make_node("Add", ["X", "W"], ["Y"])], [vi("X", [2, 3])], [vi("Y", [2, 3])],
                                 [ext]).SerializeToString())
    ext.external_data[0].value = "../../../etc/passwd"
    write("external_escape.onnx", model([helper.make_node("Add", ["X", "W"], ["Y"])], [vi("X", [2, 3])],
                                        [vi("Y", [2, 3])], [ext]).SerializeToString())
    t = numpy_helper.from_array(np.arange(6, dtype=np.int64).reshape(2, 3), "T").SerializeToString()
    write("tensor_i64.pb", t)
    write("tensor_truncated.pb", t[:-5])
    sequences()
    # Det over a batch of square matrices; RoiAlign (avg, 2x2 bins, 2x2 samples) on a 4x4 image
    write("det.onnx", model([helper.make_node("Det", ["X"], ["D"])], [vi("X", ["b", "m", "m"])],
                            [vi("D", ["b"])]).SerializeToString())
    write("roi_align.onnx", model([helper.make_node("RoiAlign", ["X", "rois", "idx"], ["Y"], output_height=2,
                                                    output_width=2, sampling_ratio=2)],
                                  [vi("X", [1, 1, 4, 4]), vi("rois", ["r", 4]), vi("idx", ["r"], TensorProto.INT64)],
                                  [vi("Y", ["r", 1, 2, 2])]).SerializeToString())
    for name in sorted(os.listdir(FIX)):
        if name.endswith(".onnx") or name.endswith(".pb"):
            shutil.copy(os.path.join(FIX, name), os.path.join(CORPUS, name.rsplit(".", 1)[0]))
    print("wrote", len(os.listdir(FIX)), "fixtures")


def sequences():
    """Sequences and optionals: a model that splits X into a sequence, inserts the last item of an
    input sequence S in front, concatenates and counts it, and asks whether an optional O holds a
    value; value files of each kind, and a truncated one."""
    seq_t = helper.make_sequence_type_proto(helper.make_tensor_type_proto(F, None))
    opt_t = helper.make_optional_type_proto(helper.make_tensor_type_proto(F, [2]))
    nodes = [helper.make_node("SplitToSequence", ["X", "sizes"], ["P"], axis=0),
             helper.make_node("SequenceAt", ["S", "minus1"], ["T0"]),
             helper.make_node("SequenceInsert", ["P", "T0", "zero"], ["Q"]),
             helper.make_node("ConcatFromSequence", ["Q"], ["C"], axis=0),
             helper.make_node("SequenceLength", ["Q"], ["L"]),
             helper.make_node("OptionalHasElement", ["O"], ["H"])]
    inits = [numpy_helper.from_array(np.array([1, 3], np.int64), "sizes"),
             numpy_helper.from_array(np.array(-1, np.int64), "minus1"),
             numpy_helper.from_array(np.array(0, np.int64), "zero")]
    g = helper.make_graph(nodes, "g", [vi("X", [4, 3]), helper.make_value_info("S", seq_t),
                                       helper.make_value_info("O", opt_t)],
                          [helper.make_value_info("Q", seq_t), vi("C", [None, 3]),
                           vi("L", [], TensorProto.INT64), vi("H", [], TensorProto.BOOL)], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    write("sequence.onnx", m.SerializeToString())
    # X split into one sequence item per element, counted and stacked back
    g = helper.make_graph([helper.make_node("SplitToSequence", ["X"], ["S"], keepdims=0),
                           helper.make_node("SequenceLength", ["S"], ["L"]),
                           helper.make_node("ConcatFromSequence", ["S"], ["Y"], axis=0, new_axis=1)],
                          "g", [vi("X", ["n"])], [vi("L", [], TensorProto.INT64), vi("Y", ["n"])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    write("split_to_sequence.onnx", m.SerializeToString())
    items = [np.arange(6, dtype=np.float32).reshape(2, 3), np.array([[7, 8, 9]], np.float32)]
    seq = numpy_helper.from_list(items, "S").SerializeToString()
    write("sequence_2.pb", seq)
    write("sequence_truncated.pb", seq[:-7])
    write("optional_none.pb", numpy_helper.from_optional(None, "O", onnx.OptionalProto.TENSOR).SerializeToString())
    write("optional_tensor.pb", numpy_helper.from_optional(np.array([1, 2], np.float32), "O").SerializeToString())
    replay_models()


def replay_models():
    """Models of tests/test_onnx_replay.c (tg_onnx_run's replays)."""
    i64 = TensorProto.INT64
    # Y = Reshape(2 X, S), S a graph input: the output's shape comes from input data (no replay)
    write("replay_steer.onnx", model([helper.make_node("Mul", ["X", "two"], ["T"]), helper.make_node("Reshape", ["T", "S"], ["Y"])],
                                     [vi("X", [2, 6]), vi("S", [2], i64)], [vi("Y", None)],
                                     [numpy_helper.from_array(np.array(2, np.float32), "two")]).SerializeToString())
    # Y = Reshape(X + 1, [N, -1]) with N = Shape(X)[0]: a host read of a value from X's shape only
    write("replay_shape.onnx", model([helper.make_node("Add", ["X", "one"], ["T"]), helper.make_node("Shape", ["X"], ["s"]),
                                      helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
                                      helper.make_node("Concat", ["n", "minus1"], ["S"], axis=0),
                                      helper.make_node("Reshape", ["T", "S"], ["Y"])],
                                     [vi("X", ["N", 2, 3])], [vi("Y", ["N", 6])],
                                     [numpy_helper.from_array(np.array(1, np.float32), "one"),
                                      numpy_helper.from_array(np.array([0], np.int64), "zero"),
                                      numpy_helper.from_array(np.array([-1], np.int64), "minus1")]).SerializeToString())


if __name__ == "__main__":
    main()
