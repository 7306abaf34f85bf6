"""XLA's own protobuf messages, as the installed jaxlib carries them: the serialized file
descriptors its XLA library embeds (libjax_common.so), loaded into a descriptor pool. The
tests use them to write what XLA writes (autotuning logs) and to read what tgraph writes
for XLA (the candidate list) with XLA's definitions, not ours.
"""
import glob
import os
import re

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_POOL = None


def _varint(b, i):
    r = s = 0
    while True:
        c = b[i]
        i += 1
        r |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return r, i


def _descriptor(data, name):
    """The FileDescriptorProto named `name` among the library's bytes: it starts with its
    name (field 1); its end is where the fields of a FileDescriptorProto end."""
    key = b"\x0a" + bytes([len(name)]) + name.encode()
    for m in re.finditer(re.escape(key), data):
        i = m.start()
        while i < len(data):
            tag, j = _varint(data, i)
            field, wire = tag >> 3, tag & 7
            if field < 1 or field > 14 or wire not in (0, 2):
                break
            if wire == 0:
                _, j = _varint(data, j)
            else:
                length, j = _varint(data, j)
                j += length
            i = j
        fd = descriptor_pb2.FileDescriptorProto()
        try:
            fd.ParseFromString(data[m.start():i])
        except Exception:
            continue
        if fd.name == name and fd.message_type:
            return fd
    raise LookupError(f"{name} is not among the descriptors of the installed jaxlib")


def pool():
    global _POOL
    if _POOL is None:
        import jaxlib
        from google.protobuf import any_pb2, duration_pb2, wrappers_pb2
        libs = glob.glob(os.path.join(os.path.dirname(jaxlib.__file__), "libjax_common.so"))
        assert libs, f"no libjax_common.so in {os.path.dirname(jaxlib.__file__)}"
        data = open(libs[0], "rb").read()
        p = descriptor_pool.DescriptorPool()
        for module in (any_pb2, duration_pb2, wrappers_pb2):
            fd = descriptor_pb2.FileDescriptorProto()
            module.DESCRIPTOR.CopyToProto(fd)
            p.Add(fd)
        for name in ("xla/tsl/protobuf/dnn.proto", "xla/autotuning.proto", "xla/autotune_results.proto"):
            p.Add(_descriptor(data, name))
        _POOL = p
    return _POOL


def message(full_name):
    """A new message of XLA's type `full_name` ("xla.AutotuningLogs")."""
    return message_factory.GetMessageClass(pool().FindMessageTypeByName(full_name))()
