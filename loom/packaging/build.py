"""From the object code a code generator produced to code that runs: every undefined symbol
attributed to the declared runtime library that provides it (docs/architecture.md, decision 3),
device objects linked into device shared objects, host objects linked by the system linker into
one shared library and loaded into this process. `loom.build` calls `finish` after code
generation.
"""

from __future__ import annotations

from loom import abi
from loom.abi import MODULE_PROVIDER
from loom.runtime import elf
from loom.runtime.device import link_shared_object
from loom.runtime.device_module import DeviceModule
from loom.runtime.linker import link_flags, load_host_object, resolve_symbols
from loom.runtime.module import Module


def finish(root: Module) -> Module:
    """Resolve the undefined symbols of every module of a freshly built tree, link each device
    module into its shared object, and link the host modules into one library loaded here (when
    they are for this machine). Returns `root`; a tree already finished is left as it is."""
    natives = [m for m in root.walk() if m.dso_exportable]
    for m in root.walk():
        if m.object_code is None:
            continue
        siblings = {
            name: other.type_key for other in natives if other is not m for name in other.signatures
        }
        undefined = elf.parse(m.object_code).undefined_symbols()
        m.extern_symbols = resolve_symbols(undefined, m.target.device, siblings)
        if isinstance(m, DeviceModule) and m.shared_object is None:
            m.shared_object = link_shared_object(m.object_code, m.device_isa)
    if natives and all(m.target.is_host for m in natives) and natives[0].library is None:
        providers = {s: lib for m in natives for s, lib in m.extern_symbols.items()}
        standalone = True  # every symbol from a sibling or a library loaded with global symbols
        for name in dict.fromkeys(providers.values()):
            if not name.startswith(MODULE_PROVIDER):
                lib = abi.get_library(name)
                if lib.load is not None:
                    lib.load()  # its symbols become global before the code that uses them
                else:
                    standalone = False
        name = next(iter(natives[0].signatures), natives[0].type_key)
        objects = [m.object_code for m in natives]
        library = load_host_object(objects, name, link_flags(providers), standalone=standalone)
        for m in natives:  # each keeps it loaded; unloaded when they and their functions are gone
            m.library = library
    return root
