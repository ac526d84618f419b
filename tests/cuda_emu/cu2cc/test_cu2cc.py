"""Tests of cuda_emu/cu2cc.py, the pre-pass that turns .cu files into host C++.

Usage: python3 test_cu2cc.py [PATH/TO/cu2cc.py]
(without the argument the script is found relative to this file: ../../../cuda_emu/cu2cc.py)

The pass runs as a program, as the build runs it. Besides the rewrites and their errors,
the tests check that every line keeps its number, that the project's real .cu files
convert with each launch and __shared__ declaration rewritten, and, where g++ exists, that
rewritten code is valid C++17 against a stub of the emulator's interface and that
__LINE__ names the .cu line of each launch.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, '..', '..', '..'))
SCRIPT = os.path.join(REPO, 'cuda_emu', 'cu2cc.py')


def run_pass(src, name='input.cu'):
    """Runs the pass on src: (exit code, output text without the #line, stderr, input path)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, name)
        out = os.path.join(tmp, 'output.cc')
        with open(path, 'w', newline='') as f:
            f.write(src)
        proc = subprocess.run([sys.executable, SCRIPT, path, out], capture_output=True,
                              text=True)
        text = None
        if os.path.exists(out):
            with open(out, newline='') as f:
                text = f.read()
        return proc.returncode, text, proc.stderr, path


def strip_code(src):
    """src with comments, string and char literals blanked (newlines kept): a check
    independent of the pass's own tokenizer. Digit separators are not handled (none in
    the project's .cu files)."""
    pattern = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                         re.S)
    return pattern.sub(lambda m: re.sub(r'[^\n]', ' ', m.group(0)), src)


# What the pass puts at the start of every kernel's body (group 1: its __launch_bounds__).
PROBE = re.compile(r' if \(::gb_emu::bounds_probe\(\)\) return '
                   r'::gb_emu::declare_bounds\(__FILE__, __LINE__(?:, (.*?))?\);')


class PassTest(unittest.TestCase):
    def convert(self, src, keep_probes=False):
        """The pass's output less its #line, and (unless kept) less the kernels' probes,
        which BoundsTest checks."""
        rc, text, err, path = run_pass(src)
        self.assertEqual(rc, 0, err)
        first, _, body = text.partition('\n')
        self.assertEqual(first, '#line 1 "%s"' % path)
        self.assertEqual(body.count('\n'), src.count('\n'), 'a newline was added or removed')
        return body if keep_probes else PROBE.sub('', body)

    def assertError(self, src, line, *fragments):
        rc, text, err, path = run_pass(src)
        self.assertEqual(rc, 1, 'expected an error, got output:\n%s' % text)
        self.assertIsNone(text, 'an output file was written despite the error')
        self.assertIn('%s:%d: error:' % (path, line), err)
        for fragment in fragments:
            self.assertIn(fragment, err)
        return err

    def assertSameLinesExcept(self, src, body, changed):
        """Every input line not in `changed` (1-based) is its output line, byte for byte."""
        for n, (a, b) in enumerate(zip(src.split('\n'), body.split('\n')), 1):
            if n not in changed:
                self.assertEqual(a, b, 'line %d changed' % n)


class LaunchTest(PassTest):
    def launch(self, call):
        """The rewrite of a one-line launch statement inside a function."""
        body = self.convert('void f() {\n    %s;\n}\n' % call)
        return body.split('\n')[1].strip()[:-1]

    # one-line launches and their rewrites after '::gb_emu::launch(__FILE__, __LINE__, ':
    # four arguments, the defaults, spaces around the brackets, qualified names, template ids,
    # and a template call right before the closing brackets
    REWRITES = [
        ('k<<<g, b, 64, s>>>(x, y)', '"k", k, g, b, 64, s)(x, y)'),
        ('k<<<g, b>>>()', '"k", k, g, b, 0, 0)()'),
        ('k<<<g, b, n * 4>>>(x)', '"k", k, g, b, n * 4, 0)(x)'),
        ('k <<< g, b >>> (x)', '"k", k, g, b, 0, 0) (x)'),
        ('ns::k<<<1, 2>>>()', '"ns::k", ns::k, 1, 2, 0, 0)()'),
        ('::k<<<1, 2>>>()', '"::k", ::k, 1, 2, 0, 0)()'),
        ('a::B<int>::k<<<1, 2>>>()', '"a::B<int>::k", a::B<int>::k, 1, 2, 0, 0)()'),
        ('forward_kernel<E, DP><<<grid, 128, bytes, st>>>(a)',
         '"forward_kernel<E, DP>", forward_kernel<E, DP>, grid, 128, bytes, st)(a)'),
        ('k<pair<int, float>, T<U<int>>><<<1, 2>>>()',
         '"k<pair<int, float>, T<U<int>>>", k<pair<int, float>, T<U<int>>>, 1, 2, 0, 0)()'),
        ('k<(A > B), N<<1><<<1, 2>>>()', '"k<(A > B), N<<1>", k<(A > B), N<<1>, 1, 2, 0, 0)()'),
        ('ns::k<float>  <<<1, 2>>>()', '"ns::k<float>", ns::k<float>, 1, 2, 0, 0)()'),
        ('k<<<g, f<int>>>>(x)', '"k", k, g, f<int>, 0, 0)(x)'),
    ]

    def test_rewrites(self):
        for call, rewrite in self.REWRITES:
            with self.subTest(call=call):
                self.assertEqual(self.launch(call),
                                 '::gb_emu::launch(__FILE__, __LINE__, ' + rewrite)

    def test_config_expressions(self):
        cases = [
            ('(unsigned)((n + 255) / 256)', 'dim3(x, y, 1)', 'sizeof(float) * 2',
             '(cudaStream_t)ctx->stream'),
            ('static_cast<unsigned>(n)', 'f<int, 2>(x)', 't::bytes<A, B>()', 'ns::stream()'),
            ('(a < b ? a : b)', '1 << 8', 'n >> 1', '(x > y) ? s1 : s2'),
            ('g[i]', '{32, 4, 1}', '[&] { return 0; }()', 'p->q.r'),
        ]
        for grid, block, shmem, stream in cases:
            with self.subTest(grid=grid):
                call = 'k<<<%s, %s, %s, %s>>>(z)' % (grid, block, shmem, stream)
                self.assertEqual(self.launch(call),
                                 '::gb_emu::launch(__FILE__, __LINE__, "k", k, %s, %s, %s, %s)(z)'
                                 % (grid, block, shmem, stream))

    def test_multi_line_launch_keeps_lines(self):
        src = ('void f() {\n'
               '    kern<T,\n'
               '         U><<<blocks(n),   // one per tile\n'
               '             threads,\n'
               '             /* no shared */ 0,\n'
               '             stream\n'
               '             >>>(a,\n'
               '                 b);\n'
               '    after();\n'
               '}\n')
        body = self.convert(src)
        lines = body.split('\n')
        self.assertEqual(lines[1], '    ::gb_emu::launch(__FILE__, __LINE__, "kern<T, U>", kern<T,')
        self.assertEqual(lines[2], '         U>, blocks(n),   // one per tile')
        self.assertEqual(lines[3], '             threads,')
        self.assertEqual(lines[4], '             /* no shared */ 0,')
        self.assertEqual(lines[5], '             stream')
        self.assertEqual(lines[6], ')(a,')
        self.assertSameLinesExcept(src, body, {2, 3, 7})

    def test_launch_in_macro_argument_and_several_per_line(self):
        body = self.convert('void f() { CHECK(a<<<1, 2>>>(x)); b<<<3, 4>>>(y); }\n')
        self.assertEqual(body, 'void f() { CHECK(::gb_emu::launch(__FILE__, __LINE__, "a", a, '
                         '1, 2, 0, 0)(x)); ::gb_emu::launch(__FILE__, __LINE__, "b", b, 3, 4, '
                         '0, 0)(y); }\n')

    def test_ignored_in_comments_literals_and_directives(self):
        src = ('// k<<<1, 2>>>(x); __shared__ float a[3];\n'
               '/* k<<<1, 2>>>(x);\n'
               '   extern __shared__ float s[]; */\n'
               '#include "launch.h" // a <<< in a comment is fine\n'
               '#define TEXT "k<<<1,2>>>() __shared__" /* __shared__ */\n'
               'const char *s = "k<<<1, 2>>>(x) __shared__";\n'
               'const char *r = R"x(k<<<1, 2>>>(x) "__shared__")x";\n'
               'const char *u = u8"<<<";\n'
               "const char c = '<', d = '\\'';\n"
               'int n = 1\'000;\n'
               'void f() { __syncthreads(); my__shared__(); __shared__x(); }\n'
               '// a comment that continues \\\n'
               '   on the next line: k<<<1, 2>>>(x);\n')
        self.assertEqual(self.convert(src), src)

    def test_crlf_kept(self):
        src = 'void f() {\r\n    k<<<1,\r\n        2>>>(x);\r\n}\r\n'
        self.assertEqual(self.convert(src),
                         'void f() {\r\n    ::gb_emu::launch(__FILE__, __LINE__, "k", k, 1,\r\n'
                         '        2, 0, 0)(x);\r\n}\r\n')


class ErrorTest(PassTest):
    # launches, then __shared__ declarations the pass refuses: (source, the line the error
    # names, fragments of its message)
    CASES = [
        ('void f() {\n  k<<<1>>>(x);\n}\n', 2, '2 to 4 arguments', 'k<<<1>>>'),
        ('void f() {\n  k<<<1, 2, 3, 4, 5>>>(x);\n}\n', 2, 'has 5'),
        ('void f() {\n  k<<<1, , 2>>>(x);\n}\n', 2, 'empty argument'),
        ('void f() {\n  k<<<n > 0, 2>>>(x);\n}\n', 2, 'in parentheses'),
        ('void f() {\n\n  k<<<1, 2);\n}\n', 3, "'>>>'"),
        ('void f() {\n\n  k<<<1, 2>(x);\n}\n', 3, 'outside parentheses'),
        ('void f() {\n  k<<<1, 2>>>;\n}\n', 2, "expected '('"),
        ('void f() {\n  obj.k<<<1, 2>>>(x);\n}\n', 2, "through '.'"),
        ('void f() {\n  p->k<<<1, 2>>>(x);\n}\n', 2, "through '->'"),
        ('void f() {\n  n::template k<int><<<1, 2>>>(x);\n}\n', 2, "through 'template'"),
        ('void f() {\n  (*p)<<<1, 2>>>(x);\n}\n', 2, "kernel's name"),
        ('#define LAUNCH(k) k<<<1, 2>>>()\n', 1, 'preprocessor directive'),
        # a multi-line launch's error names its first line
        ('void f() {\n  k<<<1,\n     2,\n     3,\n     4,\n     5>>>(x);\n}\n', 2, 'has 5'),
        # __shared__ declarations
        ('void f() {}\n__shared__ int s[4];\n', 2, 'at namespace scope'),
        ('struct S {\n  __shared__ int s[4];\n};\n', 2, 'outside a function body'),
        ('void f() {\n  __shared__ int s = 0;\n}\n', 2, 'initializer'),
        ('void f() {\n  __shared__ int s[2] = {0, 1};\n}\n', 2, 'initializer'),
        ('void f() {\n  __shared__ int s{0};\n}\n', 2, '__shared__ declaration'),
        ('void f() {\n  __shared__ int s[];\n}\n', 2, 'has no size'),
        ('void f() {\n  extern __shared__ int s[4];\n}\n', 2, 'unsized'),
        ('void f() {\n  extern __shared__ int a[], b[];\n}\n', 2, 'one unsized'),
        ('void f() {\n  extern __shared__ int s;\n}\n', 2, 'unsized'),
        ('void f() {\n  g(__shared__ x);\n}\n', 2, 'cannot parse'),
        ('void f() {\n  return sizeof(__shared__ int);\n}\n', 2, 'cannot parse'),
        ('void f() {\n  __shared__;\n}\n', 2),
        ('void f() {\n  typedef __shared__ int T;\n}\n', 2, "'typedef'"),
        ('\n#define SHARED __shared__\n', 2, 'preprocessor directive'),
        ('#if 1\n#define S \\\n   __shared__\n#endif\n', 3, 'preprocessor directive'),
        ('void f() {\n /* __shared__\n', 2, 'unterminated'),
        ('void f() {\n  g("abc);\n}\n', 2, 'unterminated'),
    ]

    def test_errors(self):
        for src, line, *fragments in self.CASES:
            with self.subTest(src=src):
                self.assertError(src, line, *fragments)

    def test_extern_at_namespace_scope(self):
        for prefix in ('', 'namespace a {\n', 'extern "C" {\n'):
            with self.subTest(prefix=prefix):
                src = prefix + 'int x;\nextern __shared__ float s[];\n'
                self.assertError(src, prefix.count('\n') + 2,
                                 'extern __shared__ at namespace scope is not supported by the '
                                 'emulator; declare it inside the kernel')


class SharedTest(PassTest):
    def rewrite(self, decl, prefix='__global__ void k() {\n    '):
        body = self.convert('%s%s\n}\n' % (prefix, decl))
        return body.split('\n')[prefix.count('\n')].strip()

    def test_dynamic(self):
        self.assertEqual(self.rewrite('extern __shared__ float shared[];'),
                         'float *shared = ::gb_emu::dynamic_shared<float>();')
        self.assertEqual(self.rewrite('extern __shared__ __align__(128) unsigned char buf[];'),
                         'unsigned char *buf = ::gb_emu::dynamic_shared<unsigned char>();')
        self.assertEqual(self.rewrite('extern __shared__ volatile int v[];'),
                         'volatile int *v = ::gb_emu::dynamic_shared<volatile int>();')
        self.assertEqual(self.rewrite('__shared__ extern float2 __align__(16) s[ ];'),
                         'float2 *s = ::gb_emu::dynamic_shared<float2>();')

    def test_dynamic_in_device_function_and_lambda(self):
        self.assertEqual(self.rewrite('extern __shared__ char b[];',
                                      'static __device__ char *base() {\n    '),
                         'char *b = ::gb_emu::dynamic_shared<char>();')
        self.assertEqual(self.rewrite('extern __shared__ char b[];',
                                      'void f() {\n  auto g = [&](int i) {\n    '),
                         'char *b = ::gb_emu::dynamic_shared<char>();')

    def test_static(self):
        site = 'static char gb_emu_site_%s; auto &%s = ::gb_emu::block_shared<%s>(&gb_emu_site_%s);'
        cases = [
            ('__shared__ double sums[256];', [('sums', 'double[256]')]),
            ('__shared__ float row_max, inv_sum;',
             [('row_max', 'float'), ('inv_sum', 'float')]),
            ('__shared__ float tile[TILE][TILE + 1], *p, q[N / 32];',
             [('tile', 'float[TILE][TILE + 1]'), ('p', 'float *'), ('q', 'float[N / 32]')]),
            ('volatile __shared__ int flags[4];', [('flags', 'volatile int[4]')]),
            ('__shared__ __align__(16) float a[8];', [('a', 'float[8]')]),
            ('__shared__ float __align__(16) a[8];', [('a', 'float[8]')]),
            ('static __shared__ alignas(8) int n;', [('n', 'int')]),
            ('__shared__ pair<int, float> p[4], q;',
             [('p', 'pair<int, float>[4]'), ('q', 'pair<int, float>')]),
            ('__shared__ typename T::acc acc[sizeof(T) > 4 ? 2 : 4];',
             [('acc', 'typename T::acc[sizeof(T) > 4 ? 2 : 4]')]),
            ('__shared__ const int *const cp;', [('cp', 'const int *const')]),
            ('__shared__ unsigned long long m[a[1]];', [('m', 'unsigned long long[a[1]]')]),
        ]
        for decl, sites in cases:
            with self.subTest(decl=decl):
                self.assertEqual(self.rewrite(decl),
                                 ' '.join(site % (n, n, t, n) for n, t in sites))

    def test_static_in_nested_blocks_and_member_functions(self):
        expected = ('static char gb_emu_site_s; '
                    'auto &s = ::gb_emu::block_shared<int[2]>(&gb_emu_site_s);')
        prefixes = ['void f() {\n  if (x) {\n    for (;;) {\n      ',
                    'namespace n {\nstruct S {\n  void f() const {\n    ',
                    'extern "C" {\ntemplate <class T> __global__ void __launch_bounds__(256) '
                    'k(T t) {\n    ',
                    'auto f() -> int {\n  ',
                    'static auto g = [] {\n  ']
        for prefix in prefixes:
            with self.subTest(prefix=prefix):
                self.assertEqual(self.rewrite('__shared__ int s[2];', prefix), expected)

    def test_multi_line_declaration_keeps_lines(self):
        src = ('__global__ void k() {\n'
               '    __shared__ float a[X],   // first\n'
               '                     b[Y];\n'
               '    __syncthreads();\n'
               '}\n')
        body = self.convert(src)
        self.assertEqual(body.split('\n')[1],
                         '    static char gb_emu_site_a; auto &a = ::gb_emu::block_shared'
                         '<float[X]>(&gb_emu_site_a); static char gb_emu_site_b; auto &b = '
                         '::gb_emu::block_shared<float[Y]>(&gb_emu_site_b);')
        self.assertEqual(body.split('\n')[2], '')
        self.assertSameLinesExcept(src, body, {2, 3})

    def test_after_directive_and_label(self):
        src = ('void f() {\n#pragma unroll\n    __shared__ int a;\n'
               'again:\n    __shared__ int b;\n}\n')
        body = self.convert(src).split('\n')
        self.assertTrue(body[2].startswith('    static char gb_emu_site_a;'), body[2])
        self.assertTrue(body[4].startswith('    static char gb_emu_site_b;'), body[4])


class CommandLineTest(unittest.TestCase):
    def test_usage(self):
        proc = subprocess.run([sys.executable, SCRIPT], capture_output=True, text=True)
        self.assertEqual(proc.returncode, 2)
        self.assertIn('usage', proc.stderr)

    def test_error_removes_stale_output(self):
        with tempfile.TemporaryDirectory() as tmp:
            path, out = os.path.join(tmp, 'bad.cu'), os.path.join(tmp, 'bad.cc')
            with open(path, 'w') as f:
                f.write('__shared__ int x;\n')
            with open(out, 'w') as f:
                f.write('stale\n')
            proc = subprocess.run([sys.executable, SCRIPT, path, out], capture_output=True,
                                  text=True)
            self.assertEqual(proc.returncode, 1)
            self.assertFalse(os.path.exists(out))


def project_cu_files():
    found = [os.path.join(REPO, 'tests', 'build', 'convert_check.cu')]
    for root, _, names in os.walk(os.path.join(REPO, 'plugins')):
        found += [os.path.join(root, n) for n in names if n.endswith('.cu')]
    return sorted(found)


class BoundsTest(PassTest):
    def test_probe_with_bounds(self):
        src = ('template <int N>\n__global__ void __launch_bounds__(N * 32,\n  2) k(int *p)\n'
               '{\n    p[0] = 1;\n}\n')
        body = self.convert(src, keep_probes=True)
        lines = body.split('\n')
        self.assertEqual(lines[1].strip(), '__global__ void')
        self.assertEqual(lines[2].strip(), 'k(int *p)')
        self.assertEqual(PROBE.search(lines[3]).group(1), 'N * 32, 2')

    def test_probe_without_bounds_and_declarations(self):
        src = '__global__ void k(int *p);\nstatic __global__ void k(int *p) { p[0] = 1; }\n'
        lines = self.convert(src, keep_probes=True).split('\n')
        self.assertEqual(lines[0], '__global__ void k(int *p);')
        match = PROBE.search(lines[1])
        self.assertIsNotNone(match)
        self.assertIsNone(match.group(1))

    def test_project_kernels_have_probes(self):
        for path in project_cu_files():
            with open(path, newline='') as f:
                src = f.read()
            kernels = len(re.findall(r'\b__global__\b[^;{]*\{', strip_code(src)))
            with self.subTest(path=os.path.relpath(path, REPO)):
                self.assertEqual(len(PROBE.findall(self.convert(src, keep_probes=True))),
                                 kernels)


class ProjectFilesTest(PassTest):
    """Every .cu file of the project converts, every launch and __shared__ declaration in
    it is rewritten, and the lines that hold none are unchanged."""

    def test_project_files(self):
        files = project_cu_files()
        self.assertGreater(len(files), 10)
        launches = shared = 0
        for path in files:
            with self.subTest(path=os.path.relpath(path, REPO)):
                with open(path, newline='') as f:
                    src = f.read()
                body = self.convert(src)
                code_in, code_out = strip_code(src), strip_code(body)
                self.assertNotIn('<<<', code_out)
                self.assertIsNone(re.search(r'\b__shared__\b', code_out))
                n_launch = code_in.count('<<<')
                self.assertEqual(code_out.count('::gb_emu::launch('), n_launch)
                n_shared = len(re.findall(r'\b__shared__\b', code_in))
                rewritten = (code_out.count('::gb_emu::dynamic_shared<')
                             + code_out.count('::gb_emu::block_shared<'))
                self.assertGreaterEqual(rewritten, n_shared)
                touched = set()
                for n, (a, b) in enumerate(zip(src.split('\n'), body.split('\n')), 1):
                    if a != b and '__launch_bounds__' not in a:
                        touched.add(n)
                        self.assertIn('::gb_emu::', b + ''.join(
                            body.split('\n')[max(0, n - 4):n]), 'line %d changed' % n)
                launches += n_launch
                shared += n_shared
        # the scan found the plugins' kernels (attn/mem_efficient's CUDA object, which
        # refuses every problem, has none)
        self.assertGreaterEqual(launches, 30)
        self.assertGreaterEqual(shared, 6)


STUB = r'''
#define __global__
#define __device__
#define __host__
#define __align__(n)
struct dim3 { dim3(unsigned x = 1, unsigned y = 1, unsigned z = 1); };
typedef struct stream_s *cudaStream_t;
namespace gb_emu {
template <class T> T *dynamic_shared();
template <class T> T &block_shared(char *site);
bool bounds_probe();
void declare_bounds(const char *file, int line, unsigned max_threads = 0,
                    unsigned min_blocks = 0, unsigned max_blocks_per_cluster = 0);
struct launcher { template <class... A> void operator()(A...) const; };
template <class K> launcher launch(const char *file, int line, const char *name, K kernel,
                                   dim3 grid, dim3 block, unsigned long shmem,
                                   cudaStream_t stream);
}
'''

SAMPLE = r'''template <class T, int N> struct tiles {
    static constexpr unsigned bytes() { return N * sizeof(T); }
};
template <class T, int N> __global__ void kern(T *out, int n)
{
    extern __shared__ __align__(16) unsigned char raw[];
    __shared__ volatile float part[32][N + 1], total;
    __shared__ T vals[N];
    vals[0] = out[0];
    part[0][0] = (float)raw[0];
    total = part[0][0];
    out[n] = vals[0];
}
__global__ void plain(int *p) { __shared__ int s; s = *p; }
void host(int *p, float *f, cudaStream_t stream, int n)
{
    using tl = tiles<float, 8>;
    kern<float, 8><<<(unsigned)((n + 255) / 256),
                      dim3(256, 1),
                      tl::bytes(), stream>>>(f, n);
    plain<<<1, 32>>>(p);
    kern<int, (3 > 2) ? 4 : 8><<<dim3(2, 2), 64, 0>>>(p, n);
}
'''


@unittest.skipUnless(shutil.which('g++'), 'g++ not found')
class CompileTest(unittest.TestCase):
    """The rewritten sample is valid C++17 against a stub of the emulator's interface, and
    __LINE__ in each launch is the .cu line where the launch starts."""

    def convert_sample(self, tmp):
        src, out = os.path.join(tmp, 'sample.cu'), os.path.join(tmp, 'sample.cc')
        with open(src, 'w') as f:
            f.write(SAMPLE)
        with open(os.path.join(tmp, 'stub.h'), 'w') as f:
            f.write(STUB)
        subprocess.run([sys.executable, SCRIPT, src, out], check=True)
        return src, out

    def test_syntax(self):
        with tempfile.TemporaryDirectory() as tmp:
            _, out = self.convert_sample(tmp)
            proc = subprocess.run(['g++', '-std=c++17', '-fsyntax-only', '-Wall', '-Wextra',
                                   '-include', os.path.join(tmp, 'stub.h'), out],
                                  capture_output=True, text=True)
            self.assertEqual(proc.returncode, 0, proc.stderr)

    def test_line_numbers(self):
        with tempfile.TemporaryDirectory() as tmp:
            src, out = self.convert_sample(tmp)
            proc = subprocess.run(['g++', '-std=c++17', '-E', '-P', out], capture_output=True,
                                  text=True, check=True)
            found = re.findall(r'launch\("([^"]*)", (\d+), "([^"]*)"', proc.stdout)
            self.assertEqual(found, [(src, '18', 'kern<float, 8>'), (src, '21', 'plain'),
                                     (src, '22', 'kern<int, (3 > 2) ? 4 : 8>')])


if __name__ == '__main__':
    if len(sys.argv) > 1 and sys.argv[1].endswith('.py'):
        SCRIPT = os.path.abspath(sys.argv.pop(1))
    unittest.main()
