# lit configuration of hetc's compiler tests: textual IR through hetc-opt (or hetc) into
# FileCheck. Tools come from the build (hetc-opt, hetc) and from LLVM 19 (FileCheck, not).
import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "hetc"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir"]
# Inputs/ holds IR that tests include; it is not a test itself.
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = config.hetc_lit_obj_root

# FileCheck, and "| not" / "| count" in pipelines.
llvm_config.use_default_substitutions()

tools = [
    ToolSubst("hetc-opt", unresolved="fatal"),
    ToolSubst("hetc", unresolved="fatal"),
    ToolSubst("not", unresolved="fatal"),
]
llvm_config.add_tool_substitutions(tools, [config.hetc_tools_dir, config.llvm_tools_dir])
