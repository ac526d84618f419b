"""Tests of cuda_emu/resources.py's reading of PTX: the instruction classes the counting
mode scales into fp32_ops, sfu_ops and instructions, the loads in flight of a kernel's
innermost loading loops, and the weight per access of each source line (the lines table),
on hand-written PTX bodies whose counts are worked out below.

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


# Line info (-lineinfo): a loop of 5 instructions with 2 accesses (a shared load at line 12,
# a generic load of an inlined header's line 30) and 1 fp32: 2.5, 0.5 and 0 per access.
# Outside it 11 instructions (ld.param, ld.global, ex2, add.rn, mul.rn and the branch of
# the loop without accesses, counted here once, cvt at line 0, ld.shared, st.global x2,
# ret) with 4 accesses, 2 fp32 (add, mul), 1 SFU (ex2): 2.75, 0.5 and 0.25 per access.
# Line 12's shared loads, one in each: the loop's, the deeper, 2.5, 0.5, 0.
LINES_PTX = r"""
.visible .entry _Z5linesPf(
	.param .u64 _Z5linesPf_param_0
)
{
	.loc	1 10 0
	ld.param.u64 	%rd1, [_Z5linesPf_param_0];
	ld.global.f32 	%f1, [%rd1];
$L__BB0_1:
	.loc	1 12 5
	ld.shared.f32 	%f2, [%r1];
	.loc	2 30 5, function_name $L__info_string0, inlined_at 1 12 5
	ld.u16 	%rs1, [%rd2];
	fma.rn.f32 	%f3, %f2, %f2, %f3;
	add.s64 	%rd2, %rd2, 2;
	@%p1 bra 	$L__BB0_1;
	.loc	1 14 0
	ex2.approx.ftz.f32 	%f4, %f3;
	add.rn.f32 	%f5, %f4, %f1;
$L__BB0_2:
	mul.rn.f32 	%f5, %f5, %f5;
	@%p2 bra 	$L__BB0_2;
	.loc	1 0 0
	cvt.rn.bf16.f32 	%rs2, %f5;
	.loc	1 12 5
	ld.shared.f32 	%f6, [%r1];
	.loc	1 15 0
	st.global.f32 	[%rd1], %f5;
	st.global.f32 	[%rd1+4], %f6;
	ret;
}
	.file	1 "/src/k/lines.cu"
	.file	2 "/src/k/../inc/act.cuh"
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

    def test_line_weights(self):
        lines = RESOURCES.ptx_lines(LINES_PTX)
        self.assertEqual(list(lines), ['_Z5linesPf'])
        expected = {
            ('/src/k/lines.cu', 10, 'global', 'load', ''): (2.75, 0.5, 0.25),
            ('/src/k/lines.cu', 12, 'shared', 'load', ''): (2.5, 0.5, 0.0),
            ('/src/inc/act.cuh', 30, 'generic', 'load', ''): (2.5, 0.5, 0.0),
            ('/src/k/lines.cu', 15, 'global', 'store', ''): (2.75, 0.5, 0.25),
        }
        got = lines['_Z5linesPf']
        self.assertEqual(sorted(got), sorted(expected))
        for key, weights in expected.items():
            for a, b in zip(got[key], weights):
                self.assertAlmostEqual(a, b, msg=str(key))
        # the old classes do not see the line directives
        self.assertEqual(RESOURCES.ptx_classes(LINES_PTX)['_Z5linesPf'][:2], (16, 5))

    def test_call_sites(self):
        # act.cuh's line 30 inlined into line 12 in the loop and into line 20 after it:
        # the line's row has the deeper one's weight, and a row per chain each its own
        ptx = LINES_PTX.replace(
            "\tst.global.f32 \t[%rd1+4], %f6;\n",
            "\tst.global.f32 \t[%rd1+4], %f6;\n"
            "\t.loc\t1 20 3\n"
            "\t.loc\t2 30 5, function_name $L__info_string0, inlined_at 1 20 3\n"
            "\tld.u16 \t%rs3, [%rd2];\n")
        got = RESOURCES.ptx_lines(ptx)['_Z5linesPf']
        line = ('/src/inc/act.cuh', 30, 'generic', 'load')
        # outside the loop now 12 instructions with 5 accesses: 2.4 per access
        for callers, weight in (('', 2.5), ('/src/k/lines.cu:12', 2.5),
                                ('/src/k/lines.cu:20', 2.4)):
            self.assertAlmostEqual(got[line + (callers,)][0], weight, msg=callers)
        self.assertEqual(sorted(k[4] for k in got if k[:4] == line),
                         ['', '/src/k/lines.cu:12', '/src/k/lines.cu:20'])

    def test_nested_call_sites(self):
        # a .loc inlined at a place nvcc named just before it extends that place's chain
        body = ("{\n\t.loc\t1 5 1\n\tmov.u32 \t%r1, %tid.x;\n"
                "\t.loc\t1 40 2, function_name $L__info_string0, inlined_at 1 5 1\n"
                "\t.loc\t2 7 3, function_name $L__info_string1, inlined_at 1 40 2\n"
                "\tld.global.f32 \t%f1, [%rd1];\n}")
        located = RESOURCES.located_instructions(body)
        self.assertEqual([i[2:] for i in located],
                         [('1', 5, ()), ('2', 7, (('1', 40), ('1', 5)))])

    def test_interleaved_call_sites(self):
        # a helper's .loc between a store's two lines (1 40 inlined at 1 5, then 2 7 at
        # 1 40, then 3 9 at 2 8, then 2 7 at 1 40 again) leaves the store its whole chain
        body = ("{\n\t.loc\t1 5 1\n\tmov.u32 \t%r1, %tid.x;\n"
                "\t.loc\t1 40 2, function_name $L__info_string0, inlined_at 1 5 1\n"
                "\t.loc\t2 8 3, function_name $L__info_string1, inlined_at 1 40 2\n"
                "\t.loc\t3 9 1, function_name $L__info_string2, inlined_at 2 8 3\n"
                "\tcvt.rn.bf16x2.f32 \t%r2, %f1, %f2;\n"
                "\t.loc\t2 7 3, function_name $L__info_string1, inlined_at 1 40 2\n"
                "\t.loc\t3 10 1, function_name $L__info_string2, inlined_at 2 8 3\n"
                "\tcvt.rn.bf16x2.f32 \t%r3, %f3, %f4;\n"
                "\t.loc\t2 7 3, function_name $L__info_string1, inlined_at 1 40 2\n"
                "\tst.global.v2.u32 \t[%rd1], {%r2, %r3};\n}")
        located = RESOURCES.located_instructions(body)
        self.assertEqual([i[2:] for i in located],
                         [('1', 5, ()), ('3', 9, (('2', 8), ('1', 40), ('1', 5))),
                          ('3', 10, (('2', 8), ('1', 40), ('1', 5))),
                          ('2', 7, (('1', 40), ('1', 5)))])

    def test_folded_moves(self):
        # moves of a constant, a symbol's address or a register are folded by ptxas and not
        # counted; from a special register, packing halves, unpacking or guarded they are
        body = ("{\n\tmov.f32 \t%f1, 0fBF318000;\n\tmov.f64 \t%fd1, 0d0000000000000000;\n"
                "\tmov.b32 \t%f2, %r1;\n\tmov.u32 \t%r2, %r3;\n\tmov.u64 \t%rd1, sums;\n"
                "\tmov.u32 \t%r4, %tid.x;\n\tmov.b32 \t%r5, {%rs1, %rs2};\n"
                "\tmov.b32 \t{%rs3, %rs4}, %r5;\n\t@%p1 mov.f32 \t%f3, 0f00000000;\n"
                "\tfma.rn.f32 \t%f4, %f1, %f2, %f3;\n\tret;\n}")
        ptx = ".visible .entry _Z1kv(\n)\n" + body
        self.assertEqual(RESOURCES.ptx_classes(ptx)['_Z1kv'][:3], (6, 0, 1))
        self.assertEqual([i[1] for i in RESOURCES.located_instructions(body)],
                         ['mov.u32', 'mov.b32', 'mov.b32', 'mov.f32', 'fma.rn.f32', 'ret'])

    def test_no_loop(self):
        body = "{\n\tld.global.f32 \t%f1, [%rd1];\n\tst.global.f32 \t[%rd2], %f1;\n\tret;\n}"
        self.assertEqual(RESOURCES.ptx_loop_loads(body), (0, 0))


if __name__ == '__main__':
    RESOURCES = load_script(sys.argv.pop(1) if len(sys.argv) > 1 else SCRIPT)
    unittest.main()
