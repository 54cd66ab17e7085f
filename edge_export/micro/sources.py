"""Which TFLite Micro sources a host build of one model compiles, and with which flags.

The sources are paths inside a TFLite Micro tree laid out by TFLM's
``create_tflm_tree.py`` (``tensorflow/``, ``signal/``, ``third_party/``): the interpreter,
allocators, memory planner and the shared kernel helpers (:data:`CORE_SOURCES`), plus each
op's kernel and its ``_common`` file (:data:`OP_SOURCES`). :data:`CORE_SOURCES` is what a
program linking the kernels of every op here needs: the profiler, timer, planner shim and the
tensor-utility files that no kernel here calls are left out (found by linking a program that
registers all of them). The flags are those of TFLM's own host build. The generated Makefile
and :mod:`edge_export.micro.build` both use these lists.
"""

from __future__ import annotations

from collections.abc import Sequence

_MICRO = "tensorflow/lite/micro"
_KERNELS = f"{_MICRO}/kernels"

CORE_SOURCES = (
    "tensorflow/compiler/mlir/lite/core/api/error_reporter.cc",
    "tensorflow/compiler/mlir/lite/schema/schema_utils.cc",
    "tensorflow/lite/core/api/flatbuffer_conversions.cc",
    "tensorflow/lite/core/c/common.cc",
    "tensorflow/lite/kernels/internal/common.cc",
    "tensorflow/lite/kernels/internal/portable_tensor_utils.cc",
    "tensorflow/lite/kernels/internal/quantization_util.cc",
    "tensorflow/lite/kernels/internal/tensor_ctypes.cc",
    "tensorflow/lite/kernels/kernel_util.cc",
    f"{_MICRO}/arena_allocator/non_persistent_arena_buffer_allocator.cc",
    f"{_MICRO}/arena_allocator/persistent_arena_buffer_allocator.cc",
    f"{_MICRO}/arena_allocator/single_arena_buffer_allocator.cc",
    f"{_MICRO}/debug_log.cc",
    f"{_MICRO}/flatbuffer_utils.cc",
    f"{_MICRO}/memory_helpers.cc",
    f"{_MICRO}/memory_planner/greedy_memory_planner.cc",
    f"{_MICRO}/memory_planner/linear_memory_planner.cc",
    f"{_MICRO}/micro_allocation_info.cc",
    f"{_MICRO}/micro_allocator.cc",
    f"{_MICRO}/micro_context.cc",
    f"{_MICRO}/micro_interpreter.cc",
    f"{_MICRO}/micro_interpreter_context.cc",
    f"{_MICRO}/micro_interpreter_graph.cc",
    f"{_MICRO}/micro_log.cc",
    f"{_MICRO}/micro_op_resolver.cc",
    f"{_MICRO}/micro_resource_variable.cc",
    f"{_MICRO}/micro_utils.cc",
    f"{_MICRO}/system_setup.cc",
    f"{_MICRO}/tflite_bridge/flatbuffer_conversions_bridge.cc",
    f"{_MICRO}/tflite_bridge/micro_error_reporter.cc",
    f"{_KERNELS}/kernel_util.cc",
)

# kernel files (under tensorflow/lite/micro/kernels/) of every op in RESOLVER_METHODS
_OP_KERNELS = {
    "CONCATENATION": ("concatenation",),
    "CONV_2D": ("conv", "conv_common"),
    "DEPTHWISE_CONV_2D": ("depthwise_conv", "depthwise_conv_common"),
    "FULLY_CONNECTED": ("fully_connected", "fully_connected_common"),
    "MAX_POOL_2D": ("pooling", "pooling_common"),
    "AVERAGE_POOL_2D": ("pooling", "pooling_common"),
    "RESHAPE": ("reshape", "reshape_common"),
    "EXPAND_DIMS": ("expand_dims",),
    "SQUEEZE": ("squeeze",),
    "SOFTMAX": ("softmax", "softmax_common"),
    "RELU": ("activations", "activations_common"),
    "LOGISTIC": ("logistic", "logistic_common"),
    "QUANTIZE": ("quantize", "quantize_common"),
    "DEQUANTIZE": ("dequantize", "dequantize_common"),
    "ADD": ("add", "add_common"),
    "MUL": ("mul", "mul_common"),
    "MEAN": ("reduce", "reduce_common"),
}
OP_SOURCES = {
    op: tuple(f"{_KERNELS}/{name}.cc" for name in names) for op, names in _OP_KERNELS.items()
}

# the C++ flags of every TFLM build, and what the host build adds
TFLM_CXX_FLAGS = (
    "-std=c++17",
    "-fno-rtti",
    "-fno-exceptions",
    "-fno-threadsafe-statics",
    "-DTF_LITE_STATIC_MEMORY",
)
HOST_DEFINES = ("-DTF_LITE_DISABLE_X86_NEON", "-DTF_LITE_USE_CTIME")
CXX_FLAGS = (*TFLM_CXX_FLAGS, *HOST_DEFINES)
C_FLAGS = ("-std=c17", "-DTF_LITE_STATIC_MEMORY")
# a Cortex-M build: no assert (it pulls in vfprintf and malloc, +6.7 KB)
CORTEX_M_DEFINES = ("-DNDEBUG", "-DFEDPRUNE_CORTEX_M")
OPTIMIZATION_FLAGS = ("-O2", "-ffunction-sections", "-fdata-sections")
LINK_FLAGS = ("-Wl,--gc-sections",)
LIBS = ("-lm",)
# include folders, relative to the TFLM tree
INCLUDE_DIRS = (
    ".",
    "third_party/gemmlowp",
    "third_party/flatbuffers/include",
    "third_party/kissfft",
    "third_party/ruy",
)


# TFLM kernel files with a CMSIS-NN variant: kernels/cmsis_nn/<name>.cc replaces
# kernels/<name>.cc (the _common.cc files stay), as TFLM's ext_libs/cmsis_nn.inc does
CMSIS_NN_KERNELS = (
    "add",
    "batch_matmul",
    "conv",
    "depthwise_conv",
    "fully_connected",
    "maximum_minimum",
    "mul",
    "pad",
    "pooling",
    "softmax",
    "svdf",
    "transpose",
    "transpose_conv",
    "unidirectional_sequence_lstm",
)
CMSIS_NN_DEFINES = ("-DCMSIS_NN", "-DARM_NN_ENABLE_F16=0", "-DARM_NN_ENABLE_F32=0")


def cmsis_nn_kernels(ops: Sequence[str]) -> list[str]:
    """The model's kernel files (``conv``, ``pooling``, ...) that CMSIS-NN variants replace."""
    names = {path.rsplit("/", 1)[1].removesuffix(".cc") for op in ops for path in OP_SOURCES[op]}
    return sorted(names & set(CMSIS_NN_KERNELS))


def tflm_sources(ops: Sequence[str]) -> list[str]:
    """The TFLite Micro sources a model with ``ops`` needs: the core, then each op's kernels
    (every file once, in a fixed order)."""
    kernels = sorted({path for op in ops for path in OP_SOURCES[op]})
    return [*CORE_SOURCES, *kernels]
