#!/usr/bin/env bash
# The tilesearch CLI as a user runs it: what it prints and its exit codes.
# Run by ctest with TILESEARCH set to the binary.
set -u
source "$(dirname "$0")/cli_lib.sh"

run help --help
expect_rc help 0
expect_out help 'ops'
expect_out help 'show'

run ops ops
expect_rc ops 0
expect_out ops '^conv2d_nchw +'
expect_out ops '^softmax +'
expect_out ops 'attrs: +axis=-1'

run ops_one ops layernorm
expect_rc ops_one 0
expect_out ops_one 'eps=1e-05'

run show show --op conv2d_nchw --shape 1x3x8x8 --shape 4x3x3x3 --attr padding=1
expect_rc show 0
expect_out show 'workload key: [0-9a-f]{16}'
expect_out show '^ *for '

run show_dtype show --op softmax --shape 4,16 --dtype float16
expect_rc show_dtype 0
expect_out show_dtype 'float16'

run bad_shape show --op softmax --shape 4xq
expect_error bad_shape "shape '4xq'"

run zero_extent show --op relu --shape 4x0
expect_error zero_extent "extent 0 is not positive"

run unknown_op show --op softmaxx --shape 4x4
expect_error unknown_op "unknown operator 'softmaxx'"

run unknown_op_list ops nosuchop
expect_error unknown_op_list "unknown operator 'nosuchop'"

run shape_count show --op conv2d_nchw --shape 1x3x8x8
expect_error shape_count "expected 2 input shapes, got 1"

run bad_attr show --op softmax --shape 4x4 --attr dim=1
expect_error bad_attr "unknown attribute 'dim'"

run bad_attr_value show --op softmax --shape 4x4 --attr axis=last
expect_error bad_attr_value "'last' is not an integer"

run attr_form show --op softmax --shape 4x4 --attr axis
expect_error attr_form "not of the form name=value"

run bad_dtype show --op softmax --shape 4x4 --dtype float33
expect_error bad_dtype "unknown dtype 'float33'"

run op_error show --op softmax --shape 4x4 --attr axis=3
expect_error op_error "softmax: axis 3 out of range for rank 2"

run no_op show --shape 4x4
expect_error no_op "--op"

run no_command
expect_error no_command "subcommand"

run unknown_command frobnicate
expect_error unknown_command "frobnicate"
# The list of commands is the registered one: every command the help names, the newest too.
expect_error unknown_command "export-dispatch"
expect_error unknown_command "predict"

finish "CLI"
