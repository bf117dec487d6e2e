"""The GPU devices of one node as the NVIDIA device plugin advertises them,
and how the kubelet's device manager allocates them to containers.

- v0.19.3 names each GPU by its UUID (deviceIDStrategy "uuid", the
  default). With time-slicing it advertises every GPU `replicas` times, as
  "<UUID>::<n>" (internal/rm/device_map.go, AnnotatedID), and sets the
  container's NVIDIA_VISIBLE_DEVICES to the UUIDs behind the IDs it got.
- The kubelet (pkg/kubelet/cm/devicemanager/manager.go, devicesToAllocate)
  hands out only IDs no running container holds, and asks the plugin's
  GetPreferredAllocation when the plugin offers one. v0.19.3 offers it:
  for replicated resources, distributedAlloc (internal/rm/allocate.go)
  takes the replica of the GPU with the fewest replicas in use.
- FIRST_FREE (fault injection) is a kubelet without a preference: the free
  IDs in order, so Pods that run one after another all get the first GPU.
- The UUIDs are the NVML stand-in's (test/stubs/stub_nvidia_ml.c,
  nvmlDeviceGetUUID), so the node's own GPU probe and its Pods agree.
"""

DISTRIBUTED = "distributed"
FIRST_FREE = "first-free"
ALLOCATIONS = (DISTRIBUTED, FIRST_FREE)


def gpu_uuid(index):
    return f"GPU-6f9abcd6-2781-31d5-1032-cc2f7821fb{0xb8 + index:02x}"


def device_ids(node, gpus, replicas):
    """The IDs the plugin advertises for `gpus` healthy GPUs."""
    del node  # every node's stand-in names its GPUs alike
    if replicas <= 1:
        return [gpu_uuid(i) for i in range(gpus)]
    return [f"{gpu_uuid(i)}::{n}" for i in range(gpus)
            for n in range(replicas)]


def uuid_of(device_id):
    return device_id.split("::", 1)[0]


def index_of(node, device_id):
    del node
    return int(uuid_of(device_id)[-2:], 16) - 0xb8


def allocate(ids, held, count, allocation):
    """`count` free IDs of `ids` (not in `held`), by the allocation policy;
    fewer when not enough are free (the kubelet then fails admission)."""
    free = [i for i in ids if i not in held]
    if allocation == FIRST_FREE:
        return free[:count]
    chosen = []
    in_use = {}
    for i in held:
        in_use[uuid_of(i)] = in_use.get(uuid_of(i), 0) + 1
    for _ in range(count):
        if not free:
            break
        best = min(free, key=lambda i: (in_use.get(uuid_of(i), 0),
                                        ids.index(i)))
        free.remove(best)
        chosen.append(best)
        in_use[uuid_of(best)] = in_use.get(uuid_of(best), 0) + 1
    return chosen
