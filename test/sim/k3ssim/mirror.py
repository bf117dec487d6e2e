"""k3s's embedded registry mirror (Spegel) as far as one pull goes: a node
whose image is missing fetches it from a peer node's containerd, for real
(`ctr export` there, `ctr import` here). Spegel serves only content a peer
holds under a digest reference (REPO@sha256:...): images imported from an
archive without one are invisible to it (spegel-org/spegel#888,
k3s-io/k3s#13222, whose fix adds the digest references on import)."""

import os
import subprocess
import tempfile
import threading
import time

CTR_TIMEOUT_SECONDS = 120


def repository(ref):
    """nvcr.io/x/y:tag -> nvcr.io/x/y (a digest or tag cut off)."""
    name = ref.split("@", 1)[0]
    last = name.rsplit("/", 1)
    if ":" in last[-1]:
        name = name[:name.rfind(":")]
    return name


def digest_ref(images, ref):
    """The name under which `images` hold `ref`'s repository by digest."""
    prefix = repository(ref) + "@sha256:"
    return next((name for name in sorted(images or ())
                 if name.startswith(prefix)), None)


def go_duration(seconds):
    """time.Duration.String() of a duration truncated to milliseconds."""
    ms = int(seconds * 1000)
    if ms < 1000:
        return f"{ms}ms"
    text = f"{ms / 1000:.3f}".rstrip("0").rstrip(".")
    return f"{text}s"


class PeerPull:
    """One pull through the mirror, run in its own thread (ctr is slow, the
    kubelet's tick must not wait)."""

    def __init__(self, image, ref, source, peer_socket, socket):
        self.image = image  # as the pod spec names it
        self.ref = ref  # normalized
        self.source = source  # the peer's digest reference
        self.started = time.time()
        self.finished = None
        self.ok = False
        self.size = 0
        self.error = ""
        self._thread = threading.Thread(
            target=self._run, args=(peer_socket, socket), daemon=True)
        self._thread.start()

    def running(self):
        return self.finished is None

    @staticmethod
    def _ctr(socket, *args):
        subprocess.run(["ctr", "--address", socket, "-n", "k8s.io"] +
                       list(args), capture_output=True, text=True,
                       timeout=CTR_TIMEOUT_SECONDS, check=True)

    def _run(self, peer_socket, socket):
        try:
            with tempfile.TemporaryDirectory() as tmp:
                archive = os.path.join(tmp, "image.tar")
                self._ctr(peer_socket, "images", "export", archive,
                          self.source)
                self.size = os.path.getsize(archive)
                self._ctr(socket, "images", "import", archive)
            # containerd's CRI pull stores the image under the name asked
            # for, next to the digest name the mirror served.
            self._ctr(socket, "images", "tag", "--force", self.source,
                      self.ref)
            self.ok = True
        except (OSError, subprocess.SubprocessError) as err:
            self.error = str(err)
        self.finished = time.time()

    def pulled_message(self, now):
        """pkg/kubelet/images/image_manager.go: the Pulled event of a pull.
        The size is the archive's, close to the image's."""
        took = go_duration(self.finished - self.started)
        waited = go_duration(now - self.started)
        return (f"Successfully pulled image \"{self.image}\" in {took} "
                f"({waited} including waiting). Image size: {self.size} "
                f"bytes.")
