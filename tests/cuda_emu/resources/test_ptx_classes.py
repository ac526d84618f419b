"""Tests of cuda_emu/resources.py's reading of PTX: the instruction classes the counting
mode scales into fp32_ops, sfu_ops and instructions, and the loads in flight of a kernel's
innermost loading loops, on a hand-written PTX body whose counts are worked out below.

Usage: python3 test_ptx_classes.py [PATH/TO/resources.py]
(without the argument the script is found relative to this file)
"""
import importlib.util
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.normpath(os.path.join(HERE, '..', '..', '..', 'cuda_emu', 'resources.py'))

# One kernel: a rolled loop of 1 global load, a loop unrolled to 3 loads, and an outer
# loop around the second (not innermost: its own loads are not counted again).
# Instructions: 20 (directives, labels and braces are not). Memory: ld.global x3, the
# ld.global.nc, ld.shared, st.shared.v4, st.global = 7 (ld.param is not). fp32: fma.rn.f32,
# add.rn.f32, setp.lt.f32, mul.rn.f16x2, div.rn.f32 = 5 (add.s64 and cvt are not). SFU:
# ex2.approx.ftz.f32, div.rn.f32 = 2. Loops: 2 innermost with loads, 4 loads in them.
PTX = r"""
.visible .entry _Z6kernelPf(
	.param .u64 _Z6kernelPf_param_0
)
.maxntid 128, 1, 1
{
	.reg .f32 	%f<9>;
	ld.param.u64 	%rd1, [_Z6kernelPf_param_0];
$L__BB0_1:
	ld.global.f32 	%f1, [%rd1];
	fma.rn.f32 	%f2, %f1, %f1, %f2;
	add.s64 	%rd1, %rd1, 4;
	@%p1 bra 	$L__BB0_1;
$L__BB0_2:
	ld.shared.f32 	%f3, [%r1];
$L__BB0_3:
	ld.global.f32 	%f4, [%rd1];
	ld.global.f32 	%f5, [%rd1+4];
	ld.global.nc.f32 	%f6, [%rd1+8];
	add.rn.f32 	%f7, %f4, %f5;
	setp.lt.f32 	%p2, %f7, %f6;
	@%p2 bra 	$L__BB0_3;
	ex2.approx.ftz.f32 	%f8, %f7;
	mul.rn.f16x2 	%r2, %r3, %r4;
	div.rn.f32 	%f8, %f8, %f3;
	cvt.rn.bf16.f32 	%rs1, %f8;
	st.shared.v4.u32 	[%r1], {%r2, %r2, %r2, %r2};
	bra.uni 	$L__BB0_2;
	st.global.f32 	[%rd1], %f8;
	ret;
}
"""


def load_script(path):
    spec = importlib.util.spec_from_file_location('resources', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class PtxClasses(unittest.TestCase):
    def test_counts(self):
        counts = RESOURCES.ptx_classes(PTX)
        self.assertEqual(list(counts), ['_Z6kernelPf'])
        instructions, memory, fp32, sfu, loops, loop_loads = counts['_Z6kernelPf']
        self.assertEqual(instructions, 20)
        self.assertEqual(memory, 7)
        self.assertEqual(fp32, 5)
        self.assertEqual(sfu, 2)
        self.assertEqual((loops, loop_loads), (2, 4))

    def test_no_loop(self):
        body = "{\n\tld.global.f32 \t%f1, [%rd1];\n\tst.global.f32 \t[%rd2], %f1;\n\tret;\n}"
        self.assertEqual(RESOURCES.ptx_loop_loads(body), (0, 0))


if __name__ == '__main__':
    RESOURCES = load_script(sys.argv.pop(1) if len(sys.argv) > 1 else SCRIPT)
    unittest.main()
