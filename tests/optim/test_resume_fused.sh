#!/usr/bin/env bash
# Exact resume with adamw_fused, as tests/cli/test_resume.sh checks it for adamw (lib.sh's
# exact_resume): 20 steps with a checkpoint at step 10, then a second run resumed from that
# checkpoint; steps 11-20 must log bit-identical losses and learning rates, and the final
# evaluation must be identical too.
# usage: test_resume_fused.sh GEARBOX BUILD_DIR SOURCE_ROOT
source "$(dirname "$0")/../cli/lib.sh"
make_data
write_config "$WORK/run.ini" "checkpoint_every = 10"
exact_resume adamw_fused --set optim.plugin=adamw_fused
finish
