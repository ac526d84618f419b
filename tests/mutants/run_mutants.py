#!/usr/bin/env python3
"""The emulator's negative tests: real kernels broken on purpose, each of which the emulated
suite must catch, every run, with the report the emulator gives for it.

Usage: run_mutants.py BUILD_DIR SOURCE_ROOT [NAME...]   (no NAME: every mutant)

Each mutant is a patch (tests/mutants/NAME.patch, against the source tree) of one
emulated plugin's sources, the test that must catch it and a fragment its output must
hold. For each: the plugins/, kernels/ and include/ folders are copied to a scratch folder
and patched there (the working tree is never touched); the emulated plugin is rebuilt
from the scratch copy with the build's own commands (`ninja -t commands`, its paths moved
to the scratch folder); a scratch plugin folder holds it beside links to every other
emulated plugin; and the test runs as `meson test` would run it (`meson introspect
--tests`: its command and environment), pointed at that folder. The mutant is caught when
the test fails and its output holds the fragment. Prints "ok: NAME" or "FAIL: NAME ..."
per mutant (SKIP when its test cannot run here); exits 1 if any survived, 77 if none ran.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# name: (emulated plugin module, test, fragment its output must hold)
MUTANTS = {
    'flash-headdim-96': ('attn-flash-cuda', 'attn-flash-cuda-shapes-emu', 'FAIL'),
    'flash-row-guard': ('attn-flash-cuda', 'attn-flash-cuda-shapes-emu', 'FAIL'),
    'flash-dynamic-smem-short': ('attn-flash-cuda', 'attn-flash-cuda-shapes-emu',
                                 'of the dynamic shared memory (extern __shared__)'),
    'flash-launch-bounds-halved': ('attn-flash-cuda', 'attn-flash-cuda-shapes-emu',
                                   'too many resources requested for launch'),
    'flash-syncwarp-removed': ('attn-flash-cuda', 'attn-flash-cuda-shapes-emu',
                               'with no __syncthreads (nor a __syncwarp of both lanes)'),
    'flash-bwd-diagonal-unmasked': ('attn-flash-cuda', 'attn-flash-cuda-shapes-emu', 'FAIL'),
    'flash-wgmma-fence-removed': ('attn-flash-cuda', 'attn-flash-cuda-shapes-emu',
                                  'with no wgmma.fence since'),
    'flash-wgmma-v-k-major': ('attn-flash-cuda', 'attn-flash-cuda-shapes-emu', 'FAIL'),
    'flash-wgmma-dq-skips-seen': ('attn-flash-cuda', 'attn-flash-cuda-shapes-emu', 'FAIL'),
    'crossentropy-max-barrier': ('device-cuda', 'gpu-device-ops-emu', 'crossentropy.cu:'),
    'dgelu-fallback-erf': ('device-cuda', 'gpu-device-ops-emu', 'FAIL'),
    'dgelu-tanh-aux-ld': ('device-cuda', 'gpu-device-ops-emu', 'EPILOGUE_AUX_LD'),
    'act-narrow-truncates': ('device-cuda', 'gpu-device-ops-emu', 'FAIL'),
    'vec16-pair-swapped': ('device-cuda', 'gpu-device-ops-emu', 'FAIL'),
    'layernorm-sums-per-tile': ('device-cuda', 'gpu-device-ops-emu', 'FAIL'),
    'nccl-stream-wait': ('comm-nccl', 'comm-nccl-overlap-emu',
                         'FAIL: every backward kernel queued after an all-reduce ran after it'),
}


def scratch_tree(root, scratch, patch):
    for folder in ('plugins', 'kernels', 'include'):
        shutil.copytree(os.path.join(root, folder), os.path.join(scratch, folder))
    subprocess.run(['patch', '-s', '-p1', '-d', scratch, '-i', patch], check=True)


def build_plugin(build, scratch, module):
    """The module rebuilt from the scratch tree into scratch/emu/MODULE.so."""
    commands = subprocess.run(['ninja', '-C', build, '-t', 'commands',
                               'cuda_emu/plugins/%s.so' % module], check=True,
                              stdout=subprocess.PIPE, text=True).stdout.splitlines()
    objects = 'cuda_emu/plugins/%s.so.p/' % module
    output = '-o cuda_emu/plugins/%s.so ' % module
    os.makedirs(os.path.join(scratch, 'obj'))
    os.makedirs(os.path.join(scratch, 'emu'))
    for line in commands:
        if objects not in line and output not in line:
            continue
        for folder in ('plugins', 'kernels', 'include'):
            line = line.replace('../%s/' % folder, scratch + '/%s/' % folder)
        line = line.replace(objects, scratch + '/obj/')
        line = line.replace(output, '-o %s/emu/%s.so ' % (scratch, module))
        subprocess.run(line, shell=True, cwd=build, check=True)


def plugin_folder(build, scratch, module):
    """scratch/emu: the mutant beside links to every other emulated plugin and table."""
    real = os.path.join(build, 'cuda_emu', 'plugins')
    for name in os.listdir(real):
        if (name.endswith('.so') or name.endswith('.tsv')) and name != module + '.so':
            os.symlink(os.path.join(real, name), os.path.join(scratch, 'emu', name))
    return real


def run_test(build, scratch, real, name):
    tests = json.loads(subprocess.run(['meson', 'introspect', '--tests'], cwd=build,
                                      check=True, stdout=subprocess.PIPE, text=True).stdout)
    test = next((t for t in tests if t['name'] == name), None)
    if test is None:
        sys.exit('run_mutants.py: no test %s in %s (is the emulator built?)' % (name, build))
    moved = lambda s: s.replace(real, scratch + '/emu')
    env = dict(os.environ)
    env.update({k: moved(v) for k, v in test['env'].items()})
    env['GEARBOX_CUDA_EMU_LAUNCHED'] = os.path.join(scratch, 'launched.txt')
    done = subprocess.run([moved(a) for a in test['cmd']], env=env, cwd=test['workdir'] or build,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=600)
    return done.returncode, done.stdout


def try_mutant(build, root, name):
    module, test, fragment = MUTANTS[name]
    started = time.time()
    with tempfile.TemporaryDirectory(prefix='gearbox-mutant-') as scratch:
        scratch_tree(root, scratch, os.path.join(HERE, name + '.patch'))
        build_plugin(build, scratch, module)
        real = plugin_folder(build, scratch, module)
        rc, out = run_test(build, scratch, real, test)
    took = time.time() - started
    if rc == 77:
        print('SKIP: %s: %s cannot run here: %s' % (name, test, out.strip().splitlines()[-1]),
              flush=True)
        return None
    if rc != 0 and fragment in out:
        print('ok: %s caught by %s (%.0f s)' % (name, test, took), flush=True)
        return True
    tail = '\n'.join(out.splitlines()[-15:])
    print('FAIL: %s survived %s (exit status %d; "%s" %s in its output); its last lines:\n%s'
          % (name, test, rc, fragment, 'found' if fragment in out else 'not found', tail),
          flush=True)
    return False


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    build, root = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    names = argv[3:] or sorted(MUTANTS)
    unknown = [n for n in names if n not in MUTANTS]
    if unknown:
        sys.exit('run_mutants.py: no mutant %s (there are: %s)' % (', '.join(unknown),
                                                                   ', '.join(sorted(MUTANTS))))
    outcome = {n: try_mutant(build, root, n) for n in names}
    survived = [n for n in names if outcome[n] is False]
    ran = [n for n in names if outcome[n] is not None]
    print('%d of %d mutants caught, %d could not run here' % (len(ran) - len(survived),
                                                              len(ran), len(names) - len(ran)))
    if not ran:
        return 77
    return 1 if survived else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
