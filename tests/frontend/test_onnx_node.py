"""onnx's own backend node tests (`onnx.backend.test`, ~1,900 built in memory) run through loom.

Every node test whose operators loom supports (all registered in `loom.graph.ops.OPERATORS`; a
Constant node counts as supported, the importer maps it) is compiled with
`loom.compile(model, target="llvm")` and its outputs compared with onnx's expected ones as onnx's
runner does (tests/frontend/onnx_node_cases.py). Tests of other operators are not collected:
`test_excluded_operators` counts them.

`EXPECTED_FAILURES` names every included test that does not pass, with its category:
- (a) a bug in a loom operator;
- (b) loom refuses the model with a clear LoomError (an attribute, a dtype or a non-constant
  input it does not support): the test checks the LoomError, passes and counts as unsupported;
- (c) onnx's converter or shape inference cannot bring the model to opset 21;
- (d) a problem elsewhere in loom (the file is named in the reason).
(a), (c) and (d) are strict xfails: a listed test that passes fails the run, so the list stays
honest. tests/frontend/conftest.py prints passed / failed / unsupported per operator and the
pass rate at the end of the run.
"""

from __future__ import annotations

import unittest
import warnings

import pytest
from onnx.backend.test import BackendTest

from loom.errors import LoomError
from tests.frontend.onnx_node_cases import LoomBackend, node_cases, run_case

with warnings.catch_warnings():
    # building onnx's test cases overflows on purpose (casts of out-of-range values)
    warnings.simplefilter("ignore", RuntimeWarning)
    CASES = node_cases()
INCLUDED = [c for c in CASES if c.supported]
EXCLUDED = [c for c in CASES if not c.supported]


NOT_CONSTANT = "must be a constant (the test feeds it as a graph input)"
NO_TYPE = "(a type loom does not have)"
NO_CONVERSION = "onnx's converter cannot take the model to opset 21"
CEIL_MODE = (
    "ceil_mode: onnx's shape inference at opset 21 keeps a last window that starts in the padding "
    "(opset 22 and onnxruntime drop it, as loom does), contradicting the model's output shape"
)
ZERO_SIZE = "loom.te refuses a dimension of 0"

EXPECTED_FAILURES: dict[str, str] = {
    **dict.fromkeys(
        ["test_batchnorm_epsilon_training_mode", "test_batchnorm_example_training_mode"],
        "(b) BatchNormalization: training_mode=1 is not supported",
    ),
    **dict.fromkeys(
        [
            "test_cast_FLOAT16_to_FLOAT4E2M1",
            "test_cast_FLOAT4E2M1_to_FLOAT",
            "test_cast_FLOAT4E2M1_to_FLOAT16",
            "test_cast_FLOAT_to_FLOAT4E2M1",
            "test_castlike_FLOAT16_to_FLOAT4E2M1_expanded",
            "test_castlike_FLOAT4E2M1_to_FLOAT16_expanded",
            "test_castlike_FLOAT4E2M1_to_FLOAT_expanded",
            "test_castlike_FLOAT_to_FLOAT4E2M1_expanded",
        ],
        f"(b) Cast on FLOAT4E2M1 {NO_TYPE} (the converter refuses the opset-23 model first)",
    ),
    **dict.fromkeys(
        [
            "test_cast_e8m0_FLOAT16_to_FLOAT8E8M0",
            "test_cast_e8m0_FLOAT8E8M0_to_FLOAT",
            "test_cast_e8m0_FLOAT8E8M0_to_FLOAT16",
            "test_cast_e8m0_FLOAT_to_FLOAT8E8M0",
        ],
        f"(b) Cast on FLOAT8E8M0 {NO_TYPE} (the converter refuses the opset-24 model first)",
    ),
    **dict.fromkeys(
        [
            "test_cast_FLOAT16_to_INT2",
            "test_cast_FLOAT_to_INT2",
            "test_cast_INT2_to_FLOAT",
            "test_cast_INT2_to_FLOAT16",
            "test_cast_INT2_to_INT8",
            "test_castlike_FLOAT16_to_INT2_expanded",
            "test_castlike_FLOAT_to_INT2_expanded",
            "test_castlike_INT2_to_FLOAT16_expanded",
            "test_castlike_INT2_to_FLOAT_expanded",
            "test_castlike_INT2_to_INT8_expanded",
        ],
        f"(b) Cast on INT2 {NO_TYPE} (the converter refuses the opset-25 model first)",
    ),
    **dict.fromkeys(
        [
            "test_cast_FLOAT16_to_UINT2",
            "test_cast_FLOAT_to_UINT2",
            "test_cast_UINT2_to_FLOAT",
            "test_cast_UINT2_to_FLOAT16",
            "test_cast_UINT2_to_UINT8",
            "test_castlike_FLOAT16_to_UINT2_expanded",
            "test_castlike_FLOAT_to_UINT2_expanded",
            "test_castlike_UINT2_to_FLOAT16_expanded",
            "test_castlike_UINT2_to_FLOAT_expanded",
            "test_castlike_UINT2_to_UINT8_expanded",
        ],
        f"(b) Cast on UINT2 {NO_TYPE} (the converter refuses the opset-25 model first)",
    ),
    **dict.fromkeys(
        ["test_cast_BFLOAT16_to_FLOAT", "test_castlike_BFLOAT16_to_FLOAT_expanded"],
        f"(b) Cast: element type BFLOAT16 {NO_TYPE}",
    ),
    **dict.fromkeys(
        [
            "test_cast_FLOAT8E4M3FN_to_FLOAT",
            "test_cast_FLOAT8E4M3FN_to_FLOAT16",
            "test_castlike_FLOAT8E4M3FN_to_FLOAT16_expanded",
            "test_castlike_FLOAT8E4M3FN_to_FLOAT_expanded",
        ],
        f"(b) Cast: element type FLOAT8E4M3FN {NO_TYPE}",
    ),
    **dict.fromkeys(
        [
            "test_cast_FLOAT8E4M3FNUZ_to_FLOAT",
            "test_cast_FLOAT8E4M3FNUZ_to_FLOAT16",
            "test_castlike_FLOAT8E4M3FNUZ_to_FLOAT16_expanded",
            "test_castlike_FLOAT8E4M3FNUZ_to_FLOAT_expanded",
        ],
        f"(b) Cast: element type FLOAT8E4M3FNUZ {NO_TYPE}",
    ),
    **dict.fromkeys(
        [
            "test_cast_FLOAT8E5M2_to_FLOAT",
            "test_cast_FLOAT8E5M2_to_FLOAT16",
            "test_castlike_FLOAT8E5M2_to_FLOAT16_expanded",
            "test_castlike_FLOAT8E5M2_to_FLOAT_expanded",
        ],
        f"(b) Cast: element type FLOAT8E5M2 {NO_TYPE}",
    ),
    **dict.fromkeys(
        [
            "test_cast_FLOAT8E5M2FNUZ_to_FLOAT",
            "test_cast_FLOAT8E5M2FNUZ_to_FLOAT16",
            "test_castlike_FLOAT8E5M2FNUZ_to_FLOAT16_expanded",
            "test_castlike_FLOAT8E5M2FNUZ_to_FLOAT_expanded",
        ],
        f"(b) Cast: element type FLOAT8E5M2FNUZ {NO_TYPE}",
    ),
    **dict.fromkeys(
        [
            "test_cast_INT4_to_FLOAT",
            "test_cast_INT4_to_FLOAT16",
            "test_cast_INT4_to_INT8",
            "test_castlike_INT4_to_FLOAT16_expanded",
            "test_castlike_INT4_to_FLOAT_expanded",
            "test_castlike_INT4_to_INT8_expanded",
        ],
        f"(b) Cast: element type INT4 {NO_TYPE}",
    ),
    **dict.fromkeys(
        [
            "test_cast_UINT4_to_FLOAT",
            "test_cast_UINT4_to_FLOAT16",
            "test_cast_UINT4_to_UINT8",
            "test_castlike_UINT4_to_FLOAT16_expanded",
            "test_castlike_UINT4_to_FLOAT_expanded",
            "test_castlike_UINT4_to_UINT8_expanded",
        ],
        f"(b) Cast: element type UINT4 {NO_TYPE}",
    ),
    **dict.fromkeys(
        ["test_cast_FLOAT_to_BFLOAT16", "test_castlike_FLOAT_to_BFLOAT16_expanded"],
        f"(b) Cast: to=BFLOAT16 {NO_TYPE}",
    ),
    **dict.fromkeys(
        [
            "test_cast_FLOAT16_to_FLOAT8E4M3FN",
            "test_cast_FLOAT_to_FLOAT8E4M3FN",
            "test_cast_no_saturate_FLOAT16_to_FLOAT8E4M3FN",
            "test_cast_no_saturate_FLOAT_to_FLOAT8E4M3FN",
            "test_castlike_FLOAT16_to_FLOAT8E4M3FN_expanded",
            "test_castlike_FLOAT_to_FLOAT8E4M3FN_expanded",
            "test_castlike_no_saturate_FLOAT16_to_FLOAT8E4M3FN_expanded",
            "test_castlike_no_saturate_FLOAT_to_FLOAT8E4M3FN_expanded",
        ],
        f"(b) Cast: to=FLOAT8E4M3FN {NO_TYPE}",
    ),
    **dict.fromkeys(
        [
            "test_cast_FLOAT16_to_FLOAT8E4M3FNUZ",
            "test_cast_FLOAT_to_FLOAT8E4M3FNUZ",
            "test_cast_no_saturate_FLOAT16_to_FLOAT8E4M3FNUZ",
            "test_cast_no_saturate_FLOAT_to_FLOAT8E4M3FNUZ",
            "test_castlike_FLOAT16_to_FLOAT8E4M3FNUZ_expanded",
            "test_castlike_FLOAT_to_FLOAT8E4M3FNUZ_expanded",
            "test_castlike_no_saturate_FLOAT16_to_FLOAT8E4M3FNUZ_expanded",
            "test_castlike_no_saturate_FLOAT_to_FLOAT8E4M3FNUZ_expanded",
        ],
        f"(b) Cast: to=FLOAT8E4M3FNUZ {NO_TYPE}",
    ),
    **dict.fromkeys(
        [
            "test_cast_FLOAT16_to_FLOAT8E5M2",
            "test_cast_FLOAT_to_FLOAT8E5M2",
            "test_cast_no_saturate_FLOAT16_to_FLOAT8E5M2",
            "test_cast_no_saturate_FLOAT_to_FLOAT8E5M2",
            "test_castlike_FLOAT16_to_FLOAT8E5M2_expanded",
            "test_castlike_FLOAT_to_FLOAT8E5M2_expanded",
            "test_castlike_no_saturate_FLOAT16_to_FLOAT8E5M2_expanded",
            "test_castlike_no_saturate_FLOAT_to_FLOAT8E5M2_expanded",
        ],
        f"(b) Cast: to=FLOAT8E5M2 {NO_TYPE}",
    ),
    **dict.fromkeys(
        [
            "test_cast_FLOAT16_to_FLOAT8E5M2FNUZ",
            "test_cast_FLOAT_to_FLOAT8E5M2FNUZ",
            "test_cast_no_saturate_FLOAT16_to_FLOAT8E5M2FNUZ",
            "test_cast_no_saturate_FLOAT_to_FLOAT8E5M2FNUZ",
            "test_castlike_FLOAT16_to_FLOAT8E5M2FNUZ_expanded",
            "test_castlike_FLOAT_to_FLOAT8E5M2FNUZ_expanded",
            "test_castlike_no_saturate_FLOAT16_to_FLOAT8E5M2FNUZ_expanded",
            "test_castlike_no_saturate_FLOAT_to_FLOAT8E5M2FNUZ_expanded",
        ],
        f"(b) Cast: to=FLOAT8E5M2FNUZ {NO_TYPE}",
    ),
    **dict.fromkeys(
        [
            "test_cast_FLOAT16_to_INT4",
            "test_cast_FLOAT_to_INT4",
            "test_castlike_FLOAT16_to_INT4_expanded",
            "test_castlike_FLOAT_to_INT4_expanded",
        ],
        f"(b) Cast: to=INT4 {NO_TYPE}",
    ),
    **dict.fromkeys(
        [
            "test_cast_FLOAT16_to_UINT4",
            "test_cast_FLOAT_to_UINT4",
            "test_castlike_FLOAT16_to_UINT4_expanded",
            "test_castlike_FLOAT_to_UINT4_expanded",
        ],
        f"(b) Cast: to=UINT4 {NO_TYPE}",
    ),
    **dict.fromkeys(
        [
            "test_constantofshape_float_ones",
            "test_constantofshape_int_shape_zero",
            "test_constantofshape_int_zeros",
        ],
        f"(b) ConstantOfShape: input 0 {NOT_CONSTANT}",
    ),
    **dict.fromkeys(
        ["test_dequantizelinear_blocked"],
        "(b) DequantizeLinear: block_size=2 (blocked quantization) is not supported",
    ),
    **dict.fromkeys(
        [
            "test_dequantizelinear_e4m3fn",
            "test_dequantizelinear_e4m3fn_float16",
            "test_dequantizelinear_e4m3fn_zero_point",
        ],
        f"(b) DequantizeLinear: element type FLOAT8E4M3FN {NO_TYPE}",
    ),
    **dict.fromkeys(
        ["test_dequantizelinear_e5m2"],
        f"(b) DequantizeLinear: element type FLOAT8E5M2 {NO_TYPE}",
    ),
    **dict.fromkeys(
        ["test_dequantizelinear_int4"],
        f"(b) DequantizeLinear: element type INT4 {NO_TYPE}",
    ),
    **dict.fromkeys(
        ["test_dequantizelinear_uint4"],
        f"(b) DequantizeLinear: element type UINT4 {NO_TYPE}",
    ),
    **dict.fromkeys(
        ["test_dequantizelinear_float4e2m1"],
        f"(b) DequantizeLinear on FLOAT4E2M1 {NO_TYPE} (the converter refuses the opset-23 model "
        "first)",
    ),
    **dict.fromkeys(
        ["test_dequantizelinear_int2", "test_dequantizelinear_uint2"],
        f"(b) DequantizeLinear on INT2/UINT2 {NO_TYPE} (the converter refuses the opset-25 model "
        "first)",
    ),
    **dict.fromkeys(
        [
            "test_training_dropout",
            "test_training_dropout_default",
            "test_training_dropout_default_mask",
            "test_training_dropout_mask",
            "test_training_dropout_zero_ratio",
            "test_training_dropout_zero_ratio_mask",
        ],
        f"(b) Dropout: input 2 {NOT_CONSTANT}",
    ),
    **dict.fromkeys(
        ["test_equal_string", "test_equal_string_broadcast"],
        f"(b) Equal: element type STRING {NO_TYPE}",
    ),
    **dict.fromkeys(
        ["test_expand_dim_changed", "test_expand_dim_unchanged"],
        f"(b) Expand: input 1 {NOT_CONSTANT}",
    ),
    "test_if": f"(b) If: input 0 (the condition) {NOT_CONSTANT}",
    "test_lstm_batchwise": "(b) LSTM: layout=1 is not supported (only time-major)",
    "test_lstm_with_peepholes": "(b) LSTM: sequence_lens is not supported",
    **dict.fromkeys(
        ["test_flexattention_fp16_expanded_ver26"],
        "(b) MatMul: float16 is not supported (refused by type inference)",
    ),
    **dict.fromkeys(
        ["test_maxpool_with_argmax_2d_precomputed_strides"],
        "(b) MaxPool: storage_order=1 is not supported",
    ),
    **dict.fromkeys(
        ["test_maxpool_with_argmax_2d_precomputed_pads"],
        "(b) MaxPool: the Indices output is not supported",
    ),
    **dict.fromkeys(
        ["test_onehot_with_bfloat16_values"],
        f"(b) OneHot on BFLOAT16 {NO_TYPE} (the converter refuses the opset-28 model first)",
    ),
    **dict.fromkeys(
        [
            "test_onehot_negative_indices",
            "test_onehot_out_of_range_indices",
            "test_onehot_with_axis",
            "test_onehot_with_negative_axis",
            "test_onehot_without_axis",
        ],
        f"(b) OneHot: input 1 {NOT_CONSTANT}",
    ),
    **dict.fromkeys(
        [
            "test_constant_pad",
            "test_constant_pad_axes",
            "test_constant_pad_negative_axes",
            "test_edge_pad",
            "test_reflect_pad",
            "test_wrap_pad",
        ],
        f"(b) Pad: input 1 {NOT_CONSTANT}",
    ),
    **dict.fromkeys(
        [
            "test_center_crop_pad_crop_and_pad_expanded",
            "test_center_crop_pad_crop_axes_chw_expanded",
            "test_center_crop_pad_crop_axes_hwc_expanded",
            "test_center_crop_pad_crop_expanded",
            "test_center_crop_pad_crop_negative_axes_hwc_expanded",
            "test_center_crop_pad_pad_expanded",
        ],
        f"(b) Pad: input 1 {NOT_CONSTANT}; Slice: input 1 {NOT_CONSTANT}",
    ),
    **dict.fromkeys(
        ["test_quantizelinear_blocked_asymmetric", "test_quantizelinear_blocked_symmetric"],
        "(b) QuantizeLinear: block_size=2 (blocked quantization) is not supported",
    ),
    **dict.fromkeys(
        ["test_quantizelinear_e4m3fn"],
        f"(b) QuantizeLinear: element type FLOAT8E4M3FN {NO_TYPE}",
    ),
    **dict.fromkeys(
        ["test_quantizelinear_e5m2"],
        f"(b) QuantizeLinear: element type FLOAT8E5M2 {NO_TYPE}",
    ),
    **dict.fromkeys(
        ["test_quantizelinear_int4"],
        f"(b) QuantizeLinear: element type INT4 {NO_TYPE}",
    ),
    **dict.fromkeys(
        ["test_quantizelinear_uint4"],
        f"(b) QuantizeLinear: element type UINT4 {NO_TYPE}",
    ),
    **dict.fromkeys(
        ["test_quantizelinear_float4e2m1"],
        f"(b) QuantizeLinear on FLOAT4E2M1 {NO_TYPE} (the converter refuses the opset-23 model "
        "first)",
    ),
    **dict.fromkeys(
        ["test_quantizelinear_int2", "test_quantizelinear_uint2"],
        f"(b) QuantizeLinear on INT2/UINT2 {NO_TYPE} (the converter refuses the opset-25 model "
        "first)",
    ),
    **dict.fromkeys(
        ["test_range_bfloat16_type_positive_delta"],
        f"(b) Range on BFLOAT16 {NO_TYPE} (the converter refuses the opset-27 model first)",
    ),
    **dict.fromkeys(
        ["test_range_float_type_positive_delta", "test_range_int32_type_negative_delta"],
        f"(b) Range: input 0 {NOT_CONSTANT}",
    ),
    **dict.fromkeys(
        [
            "test_reduce_l1_default_axes_keepdims_example",
            "test_reduce_l1_default_axes_keepdims_random",
            "test_reduce_l1_do_not_keepdims_example",
            "test_reduce_l1_do_not_keepdims_random",
            "test_reduce_l1_empty_set",
            "test_reduce_l1_keep_dims_example",
            "test_reduce_l1_keep_dims_random",
            "test_reduce_l1_negative_axes_keep_dims_example",
            "test_reduce_l1_negative_axes_keep_dims_random",
        ],
        f"(b) ReduceL1: input 1 {NOT_CONSTANT}",
    ),
    **dict.fromkeys(
        [
            "test_reduce_l2_default_axes_keepdims_example",
            "test_reduce_l2_default_axes_keepdims_random",
            "test_reduce_l2_do_not_keepdims_example",
            "test_reduce_l2_do_not_keepdims_random",
            "test_reduce_l2_empty_set",
            "test_reduce_l2_keep_dims_example",
            "test_reduce_l2_keep_dims_random",
            "test_reduce_l2_negative_axes_keep_dims_example",
            "test_reduce_l2_negative_axes_keep_dims_random",
        ],
        f"(b) ReduceL2: input 1 {NOT_CONSTANT}",
    ),
    **dict.fromkeys(
        [
            "test_reduce_log_sum_asc_axes",
            "test_reduce_log_sum_default",
            "test_reduce_log_sum_desc_axes",
            "test_reduce_log_sum_empty_set",
            "test_reduce_log_sum_negative_axes",
        ],
        f"(b) ReduceLogSum: input 1 {NOT_CONSTANT}",
    ),
    **dict.fromkeys(
        [
            "test_reduce_log_sum_exp_default_axes_keepdims_example",
            "test_reduce_log_sum_exp_default_axes_keepdims_random",
            "test_reduce_log_sum_exp_do_not_keepdims_example",
            "test_reduce_log_sum_exp_do_not_keepdims_random",
            "test_reduce_log_sum_exp_empty_set",
            "test_reduce_log_sum_exp_keepdims_example",
            "test_reduce_log_sum_exp_keepdims_random",
            "test_reduce_log_sum_exp_negative_axes_keepdims_example",
            "test_reduce_log_sum_exp_negative_axes_keepdims_random",
        ],
        f"(b) ReduceLogSumExp: input 1 {NOT_CONSTANT}",
    ),
    **dict.fromkeys(
        [
            "test_reduce_max_bool_inputs",
            "test_reduce_max_do_not_keepdims_example",
            "test_reduce_max_do_not_keepdims_random",
            "test_reduce_max_empty_set",
            "test_reduce_max_empty_set_bool",
            "test_reduce_max_keepdims_example",
            "test_reduce_max_keepdims_random",
            "test_reduce_max_negative_axes_keepdims_example",
            "test_reduce_max_negative_axes_keepdims_random",
        ],
        f"(b) ReduceMax: input 1 {NOT_CONSTANT}",
    ),
    **dict.fromkeys(
        [
            "test_reduce_mean_default_axes_keepdims_example",
            "test_reduce_mean_default_axes_keepdims_random",
            "test_reduce_mean_do_not_keepdims_example",
            "test_reduce_mean_do_not_keepdims_random",
            "test_reduce_mean_keepdims_example",
            "test_reduce_mean_keepdims_random",
            "test_reduce_mean_negative_axes_keepdims_example",
            "test_reduce_mean_negative_axes_keepdims_random",
        ],
        f"(b) ReduceMean: input 1 {NOT_CONSTANT}",
    ),
    **dict.fromkeys(
        [
            "test_reduce_min_bool_inputs",
            "test_reduce_min_do_not_keepdims_example",
            "test_reduce_min_do_not_keepdims_random",
            "test_reduce_min_empty_set",
            "test_reduce_min_keepdims_example",
            "test_reduce_min_keepdims_random",
            "test_reduce_min_negative_axes_keepdims_example",
            "test_reduce_min_negative_axes_keepdims_random",
        ],
        f"(b) ReduceMin: input 1 {NOT_CONSTANT}",
    ),
    **dict.fromkeys(
        [
            "test_reduce_prod_do_not_keepdims_example",
            "test_reduce_prod_do_not_keepdims_random",
            "test_reduce_prod_empty_set",
            "test_reduce_prod_keepdims_example",
            "test_reduce_prod_keepdims_random",
            "test_reduce_prod_negative_axes_keepdims_example",
            "test_reduce_prod_negative_axes_keepdims_random",
        ],
        f"(b) ReduceProd: input 1 {NOT_CONSTANT}",
    ),
    **dict.fromkeys(
        [
            "test_reduce_l1_default_axes_keepdims_example_expanded",
            "test_reduce_l1_default_axes_keepdims_random_expanded",
            "test_reduce_l1_do_not_keepdims_example_expanded",
            "test_reduce_l1_do_not_keepdims_random_expanded",
            "test_reduce_l1_empty_set_expanded",
            "test_reduce_l1_keep_dims_example_expanded",
            "test_reduce_l1_keep_dims_random_expanded",
            "test_reduce_l1_negative_axes_keep_dims_example_expanded",
            "test_reduce_l1_negative_axes_keep_dims_random_expanded",
            "test_reduce_log_sum_asc_axes_expanded",
            "test_reduce_log_sum_default_expanded",
            "test_reduce_log_sum_desc_axes_expanded",
            "test_reduce_log_sum_empty_set_expanded",
            "test_reduce_log_sum_negative_axes_expanded",
            "test_reduce_sum_default_axes_keepdims_example",
            "test_reduce_sum_default_axes_keepdims_random",
            "test_reduce_sum_do_not_keepdims_example",
            "test_reduce_sum_do_not_keepdims_random",
            "test_reduce_sum_empty_axes_input_noop",
            "test_reduce_sum_empty_axes_input_noop_example",
            "test_reduce_sum_empty_set",
            "test_reduce_sum_empty_set_non_reduced_axis_zero",
            "test_reduce_sum_keepdims_example",
            "test_reduce_sum_keepdims_random",
            "test_reduce_sum_negative_axes_keepdims_example",
            "test_reduce_sum_negative_axes_keepdims_random",
            "test_reduce_sum_square_default_axes_keepdims_example_expanded",
            "test_reduce_sum_square_default_axes_keepdims_random_expanded",
            "test_reduce_sum_square_do_not_keepdims_example_expanded",
            "test_reduce_sum_square_do_not_keepdims_random_expanded",
            "test_reduce_sum_square_empty_set_expanded",
            "test_reduce_sum_square_keepdims_example_expanded",
            "test_reduce_sum_square_keepdims_random_expanded",
            "test_reduce_sum_square_negative_axes_keepdims_example_expanded",
            "test_reduce_sum_square_negative_axes_keepdims_random_expanded",
        ],
        f"(b) ReduceSum: input 1 {NOT_CONSTANT}",
    ),
    **dict.fromkeys(
        [
            "test_reduce_sum_square_default_axes_keepdims_example",
            "test_reduce_sum_square_default_axes_keepdims_random",
            "test_reduce_sum_square_do_not_keepdims_example",
            "test_reduce_sum_square_do_not_keepdims_random",
            "test_reduce_sum_square_empty_set",
            "test_reduce_sum_square_keepdims_example",
            "test_reduce_sum_square_keepdims_random",
            "test_reduce_sum_square_negative_axes_keepdims_example",
            "test_reduce_sum_square_negative_axes_keepdims_random",
        ],
        f"(b) ReduceSumSquare: input 1 {NOT_CONSTANT}",
    ),
    **dict.fromkeys(
        [
            "test_reshape_allowzero_reordered",
            "test_reshape_extended_dims",
            "test_reshape_negative_dim",
            "test_reshape_negative_extended_dims",
            "test_reshape_one_dim",
            "test_reshape_reduced_dims",
            "test_reshape_reordered_all_dims",
            "test_reshape_reordered_last_dims",
            "test_reshape_zero_and_negative_dim",
            "test_reshape_zero_dim",
        ],
        f"(b) Reshape: input 1 {NOT_CONSTANT}",
    ),
    **dict.fromkeys(
        [
            "test_resize_downsample_scales_linear_antialias",
            "test_resize_downsample_sizes_linear_antialias",
        ],
        "(b) Resize: antialias=1 not supported",
    ),
    **dict.fromkeys(
        [
            "test_resize_tf_crop_and_resize",
            "test_resize_tf_crop_and_resize_axes_2_3",
            "test_resize_tf_crop_and_resize_axes_3_2",
            "test_resize_tf_crop_and_resize_extrapolation_value",
        ],
        "(b) Resize: coordinate_transformation_mode=tf_crop_and_resize not supported",
    ),
    **dict.fromkeys(
        [
            "test_resize_downsample_scales_linear",
            "test_resize_downsample_scales_linear_align_corners",
            "test_resize_downsample_scales_linear_half_pixel_symmetric",
            "test_resize_downsample_scales_nearest",
            "test_resize_upsample_scales_linear",
            "test_resize_upsample_scales_linear_align_corners",
            "test_resize_upsample_scales_linear_half_pixel_symmetric",
            "test_resize_upsample_scales_nearest",
            "test_resize_upsample_scales_nearest_axes_2_3",
            "test_resize_upsample_scales_nearest_axes_3_2",
        ],
        f"(b) Resize: input 2 {NOT_CONSTANT}",
    ),
    **dict.fromkeys(
        [
            "test_resize_downsample_sizes_linear_pytorch_half_pixel",
            "test_resize_downsample_sizes_nearest",
            "test_resize_upsample_sizes_nearest",
            "test_resize_upsample_sizes_nearest_axes_2_3",
            "test_resize_upsample_sizes_nearest_axes_3_2",
            "test_resize_upsample_sizes_nearest_ceil_half_pixel",
            "test_resize_upsample_sizes_nearest_floor_align_corners",
            "test_resize_upsample_sizes_nearest_round_prefer_ceil_asymmetric",
        ],
        f"(b) Resize: input 3 {NOT_CONSTANT}",
    ),
    **dict.fromkeys(
        [
            "test_resize_downsample_sizes_nearest_not_larger",
            "test_resize_upsample_sizes_nearest_not_larger",
        ],
        "(b) Resize: keep_aspect_ratio_policy=not_larger not supported",
    ),
    **dict.fromkeys(
        [
            "test_resize_downsample_sizes_nearest_not_smaller",
            "test_resize_upsample_sizes_nearest_not_smaller",
        ],
        "(b) Resize: keep_aspect_ratio_policy=not_smaller not supported",
    ),
    **dict.fromkeys(
        [
            "test_resize_downsample_scales_cubic",
            "test_resize_downsample_scales_cubic_A_n0p5_exclude_outside",
            "test_resize_downsample_scales_cubic_align_corners",
            "test_resize_downsample_scales_cubic_antialias",
            "test_resize_downsample_sizes_cubic",
            "test_resize_downsample_sizes_cubic_antialias",
            "test_resize_upsample_scales_cubic",
            "test_resize_upsample_scales_cubic_A_n0p5_exclude_outside",
            "test_resize_upsample_scales_cubic_align_corners",
            "test_resize_upsample_scales_cubic_asymmetric",
            "test_resize_upsample_sizes_cubic",
        ],
        "(b) Resize: mode=cubic not supported (supported: nearest, linear)",
    ),
    **dict.fromkeys(
        [
            "test_slice",
            "test_slice_default_axes",
            "test_slice_default_steps",
            "test_slice_end_out_of_bounds",
            "test_slice_neg",
            "test_slice_neg_steps",
            "test_slice_negative_axes",
            "test_slice_start_out_of_bounds",
        ],
        f"(b) Slice: input 1 {NOT_CONSTANT}",
    ),
    **dict.fromkeys(
        [
            "test_split_variable_parts_1d_opset13",
            "test_split_variable_parts_1d_opset18",
            "test_split_variable_parts_2d_opset13",
            "test_split_variable_parts_2d_opset18",
            "test_split_variable_parts_default_axis_opset13",
            "test_split_variable_parts_default_axis_opset18",
            "test_split_zero_size_splits_opset13",
            "test_split_zero_size_splits_opset18",
        ],
        f"(b) Split: input 1 {NOT_CONSTANT}",
    ),
    **dict.fromkeys(
        ["test_squeeze", "test_squeeze_negative_axes"],
        f"(b) Squeeze: input 1 {NOT_CONSTANT}",
    ),
    **dict.fromkeys(
        ["test_tile", "test_tile_precomputed"],
        f"(b) Tile: input 1 {NOT_CONSTANT}",
    ),
    **dict.fromkeys(
        [
            "test_tril_neg",
            "test_tril_out_neg",
            "test_tril_out_pos",
            "test_tril_pos",
            "test_tril_square_neg",
            "test_tril_zero",
            "test_triu_neg",
            "test_triu_one_row",
            "test_triu_out_neg_out",
            "test_triu_out_pos",
            "test_triu_pos",
            "test_triu_square_neg",
            "test_triu_zero",
        ],
        f"(b) Trilu: input 1 {NOT_CONSTANT}",
    ),
    **dict.fromkeys(
        [
            "test_unsqueeze_axis_0",
            "test_unsqueeze_axis_1",
            "test_unsqueeze_axis_2",
            "test_unsqueeze_negative_axes",
            "test_unsqueeze_three_axes",
            "test_unsqueeze_two_axes",
            "test_unsqueeze_unsorted_axes",
        ],
        f"(b) Unsqueeze: input 1 {NOT_CONSTANT}",
    ),
    **dict.fromkeys(
        ["test_identity_opt"],
        "(b) a graph input is not a tensor (optional_type)",
    ),
    **dict.fromkeys(
        ["test_identity_sequence"],
        "(b) a graph input is not a tensor (sequence_type)",
    ),
    **dict.fromkeys(
        [
            "test_bitshift_left_int16",
            "test_bitshift_left_int32",
            "test_bitshift_left_int32_negative_shift",
            "test_bitshift_left_int32_overflow",
            "test_bitshift_left_int32_shift_ge_width",
            "test_bitshift_left_int64",
            "test_bitshift_left_int8",
            "test_bitshift_left_int8_negative_shift",
            "test_bitshift_left_int8_overflow",
            "test_bitshift_left_int8_shift_ge_width",
            "test_bitshift_right_int16",
            "test_bitshift_right_int32",
            "test_bitshift_right_int32_negative_input",
            "test_bitshift_right_int32_negative_shift",
            "test_bitshift_right_int32_shift_ge_width",
            "test_bitshift_right_int64",
            "test_bitshift_right_int8",
            "test_bitshift_right_int8_negative_input",
            "test_bitshift_right_int8_negative_shift",
            "test_bitshift_right_int8_shift_ge_width",
        ],
        f"(c) BitShift on signed integers is new in opset 28: {NO_CONVERSION}",
    ),
    **dict.fromkeys(
        [
            "test_mod_float16_mixed_sign_fmod_0",
            "test_mod_float32_mixed_sign_fmod_0",
            "test_mod_float64_mixed_sign_fmod_0",
            "test_mod_float_edge_cases_fmod_0_float16",
            "test_mod_float_edge_cases_fmod_0_float32",
            "test_mod_float_edge_cases_fmod_0_float64",
        ],
        f"(c) Mod of floats with fmod=0 is new in opset 28: {NO_CONVERSION}",
    ),
    **dict.fromkeys(
        ["test_range_float16_type_positive_delta"],
        f"(c) Range on FLOAT16 is new in opset 27: {NO_CONVERSION}",
    ),
    **dict.fromkeys(
        ["test_spacetodepth_crd_mode_example"],
        f"(c) SpaceToDepth mode=CRD is new in opset 28: {NO_CONVERSION}",
    ),
    **dict.fromkeys(
        [
            "test_averagepool_2d_ceil_last_window_starts_on_pad",
            "test_maxpool_2d_ceil_output_size_reduce_by_one",
        ],
        f"(c) {CEIL_MODE}",
    ),
    **dict.fromkeys(
        ["test_globalmaxpool", "test_globalmaxpool_precomputed"],
        "(c) onnx's converter has no adapter from GlobalMaxPool-22 to opset 21",
    ),
    **dict.fromkeys(
        [
            "test_rotary_embedding_3d_input_expanded",
            "test_rotary_embedding_expanded",
            "test_rotary_embedding_interleaved_expanded",
            "test_rotary_embedding_no_position_ids_expanded",
            "test_rotary_embedding_no_position_ids_interleaved_expanded",
        ],
        f"(d) a Split output of size 0: {ZERO_SIZE}",
    ),
    **dict.fromkeys(
        ["test_shape_start_greater_than_end"],
        f"(d) the empty output of Shape with start > end: {ZERO_SIZE}",
    ),
}


REFUSALS = ("(b)", "(c)")
"""Categories loom must refuse with a LoomError (an unsupported attribute, type or opset): such a
test counts as unsupported, not as failed."""


def _param(case):
    reason = EXPECTED_FAILURES.get(case.name)
    marks = []
    if reason is not None and not reason.startswith(REFUSALS):
        marks.append(pytest.mark.xfail(strict=True, reason=reason))
    return pytest.param(case, id=case.name, marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in INCLUDED])
def test_node(case, record_property):
    record_property("onnx_operator", case.operator)
    reason = EXPECTED_FAILURES.get(case.name, "")
    if not reason.startswith(REFUSALS):
        run_case(case)
        return
    try:
        run_case(case)
    except LoomError:
        # refused as documented: the test passes and counts as unsupported in the summary
        record_property("onnx_unsupported", reason)
        return
    pytest.fail(f"{case.name} now passes: remove it from EXPECTED_FAILURES ({reason})")


def test_expected_failures_are_included_tests():
    included = {c.name for c in INCLUDED}
    stale = sorted(set(EXPECTED_FAILURES) - included)
    assert not stale, f"not included node tests (operator removed or test renamed): {stale}"
    for name, reason in EXPECTED_FAILURES.items():
        assert reason[:3] in ("(a)", "(b)", "(c)", "(d)"), f"{name}: no category in {reason!r}"


def test_excluded_operators(record_property):
    """Tests of operators loom does not have: counted for the summary, never run."""
    counts: dict[str, int] = {}
    for case in EXCLUDED:
        assert case.unsupported_operators, case.name
        counts[case.operator] = counts.get(case.operator, 0) + 1
    record_property("onnx_excluded", counts)
    assert len(INCLUDED) + len(EXCLUDED) == len(CASES)


def test_backend_plugs_into_onnx_runner():
    """LoomBackend is an onnx Backend: onnx's own runner runs a node test with it (on CPU; the
    CUDA variant is skipped by supports_device)."""
    runner = BackendTest(LoomBackend, __name__).include(r"^test_abs_(cpu|cuda)$")
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(
        runner.test_cases["OnnxBackendNodeModelTest"]
    )
    result = unittest.TestResult()
    suite.run(result)
    assert not result.errors and not result.failures, result.errors + result.failures
    skipped = {test.id().rsplit(".", 1)[-1]: why for test, why in result.skipped}
    assert "test_abs_cpu" not in skipped
    assert "doesn't support device CUDA" in skipped["test_abs_cuda"]
