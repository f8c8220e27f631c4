"""Prefect Blocks for slotrelay's configuration: the code model, the sandbox policy, a chain's folders.

`prefect block register -m blocks` registers the three block types with the server, after which
they can be created and edited in the UI (Blocks, +). Flows take a saved block by name: `pen-write`
takes `model_block` (CodeModel) and `sandbox_policy` (SandboxPolicy), `registry-review` takes
`sandbox_policy`, `chain` takes `folders_block` (ChainFolders) and, for its pen nodes, `model_block` and
`sandbox_policy`; `slotrelay watch --folders-block/--model-block/--sandbox-policy` names them on the
deployments it creates. Without them everything keeps working from the environment and the project's
`.env`.
"""

from blocks.chain_folders import ChainFolders
from blocks.code_model import CodeModel
from blocks.sandbox_policy import SandboxPolicy

__all__ = ["ChainFolders", "CodeModel", "SandboxPolicy"]
