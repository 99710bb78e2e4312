"""Paths of the test fixtures that model H100 as the presets did before issue 40 (mma.sync per
Tensor Core, a register file per SM sub-partition: tests/data/h100-sync.yaml), for the tests
whose hand counts were derived on that structure; archs/h100.yaml models wgmma."""
import pathlib

DATA = pathlib.Path(__file__).parent / "data"
H100_SYNC = str(DATA / "h100-sync.yaml")
H100_SYNC_EDP = str(DATA / "h100-sync-gemm-4096-edp.yaml")
H100_SYNC_K128 = str(DATA / "h100-sync-gemm-4096-sync-k128.yaml")
H100_SYNC_K256 = str(DATA / "h100-sync-gemm-4096-sync-k256.yaml")
