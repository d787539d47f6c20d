"""torch.hub: downloading checkpoints into a cache and loading models from a
repository's hubconf.py.

URLs are fetched with urllib: file:// URLs and plain local paths always
work; http(s) needs a network, and without one the error says which URL
could not be reached. hub.load/list/help read hubconf.py from a local
directory (source="local") or from a GitHub repository downloaded as a zip
into get_dir() (source="github", needs the network)."""
import hashlib
import importlib.util
import os
import re
import shutil
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from urllib.parse import urlparse  # noqa: F401  (torch.hub re-exports these; timm imports them)
from urllib.request import Request, urlopen  # noqa: F401

__all__ = ["download_url_to_file", "get_dir", "help", "list", "load", "load_state_dict_from_url", "set_dir",
           "HASH_REGEX"]

try:
    from tqdm import tqdm  # the progress bar hub (and torchvision via model_zoo) use
except ImportError:
    class tqdm:
        """A stand-in progress counter used when tqdm is not installed: counts
        units and prints a percentage line to stderr unless disabled."""

        def __init__(self, total=None, disable=False, unit=None, unit_scale=None, unit_divisor=None, **kwargs):
            self.total, self.disable, self.n = total, disable, 0

        def update(self, n):
            if self.disable:
                return
            self.n += n
            if self.total:
                sys.stderr.write(f"\r{100 * self.n / float(self.total):.1f}%")
            else:
                sys.stderr.write(f"\r{self.n} bytes")
            sys.stderr.flush()

        def close(self):
            self.disable = True

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            if not self.disable:
                sys.stderr.write("\n")

# the hash prefix in a checkpoint's file name: resnet18-f37072fd.pth -> f37072fd
HASH_REGEX = re.compile(r"-([a-f0-9]*)\.")

_hub_dir = None
_READ_TIMEOUT_S = 60
VAR_DEPENDENCY = "dependencies"
MODULE_HUBCONF = "hubconf.py"


def _get_torch_home():
    xdg = os.getenv("XDG_CACHE_HOME", os.path.join("~", ".cache"))
    return os.path.expanduser(os.getenv("TORCH_HOME", os.path.join(xdg, "torch")))


def get_dir():
    """The hub cache directory: set_dir's, else $TORCH_HOME/hub
    ($TORCH_HOME defaults to $XDG_CACHE_HOME/torch, i.e. ~/.cache/torch)."""
    if _hub_dir is not None:
        return _hub_dir
    return os.path.join(_get_torch_home(), "hub")


def set_dir(d):
    global _hub_dir
    _hub_dir = os.path.expanduser(os.fspath(d))


def _open_url(url):
    """A readable response for url (a URL or a local path)."""
    if os.path.exists(url):
        return open(url, "rb")
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme == "":
        raise FileNotFoundError(f"torch.hub: '{url}' is neither an existing file nor a URL")
    try:
        return urllib.request.urlopen(urllib.request.Request(url, headers={"User-Agent": "ember.hub"}),
                                      timeout=_READ_TIMEOUT_S)
    except urllib.error.HTTPError:
        raise
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        if parsed.scheme == "file":
            raise FileNotFoundError(f"torch.hub: cannot read '{url}': {reason}") from None
        raise RuntimeError(f"torch.hub: cannot download '{url}': {reason}. The URL could not be reached (is this "
                           "machine offline?). Download the file elsewhere and pass its local path or a file:// "
                           "URL, or put it in the hub cache directory (torch.hub.get_dir()).") from None


def download_url_to_file(url, dst, hash_prefix=None, progress=True):
    """Copy the object at url to the file dst (written whole or not at all).
    hash_prefix: the SHA-256 hex digest must start with it, else RuntimeError."""
    dst = os.path.expanduser(os.fspath(dst))
    dst_dir = os.path.dirname(os.path.abspath(dst))
    sha256 = hashlib.sha256() if hash_prefix is not None else None
    with _open_url(url) as src:
        fd, tmp = tempfile.mkstemp(prefix=os.path.basename(dst) + ".", suffix=".partial", dir=dst_dir)
        try:
            with os.fdopen(fd, "wb") as out:
                while True:
                    chunk = src.read(1 << 20)
                    if not chunk:
                        break
                    out.write(chunk)
                    if sha256 is not None:
                        sha256.update(chunk)
            if sha256 is not None:
                digest = sha256.hexdigest()
                if digest[:len(hash_prefix)] != hash_prefix:
                    raise RuntimeError(f'invalid hash value (expected "{hash_prefix}", got "{digest}")')
            os.replace(tmp, dst)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)


def load_state_dict_from_url(url, model_dir=None, map_location=None, progress=True, check_hash=False,
                             file_name=None, weights_only=False):
    """ember.load of the checkpoint at url, downloaded once into
    model_dir (default get_dir()/checkpoints). check_hash: the file name's
    hash prefix (HASH_REGEX, e.g. name-<sha256 prefix>.pth) must match its
    SHA-256."""
    from .serialization import load
    if model_dir is None:
        model_dir = os.path.join(get_dir(), "checkpoints")
    os.makedirs(model_dir, exist_ok=True)
    filename = file_name or os.path.basename(urllib.parse.urlparse(url).path)
    cached_file = os.path.join(model_dir, filename)
    if not os.path.exists(cached_file):
        hash_prefix = None
        if check_hash:
            found = HASH_REGEX.search(filename)
            hash_prefix = found.group(1) if found else None
        if progress:
            sys.stderr.write(f'Downloading: "{url}" to {cached_file}\n')
        download_url_to_file(url, cached_file, hash_prefix, progress=progress)
    return load(cached_file, map_location=map_location, weights_only=weights_only)


# -- hubconf entry points ------------------------------------------------------
def _import_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _parse_repo_info(github):
    repo, _, ref = github.partition(":")
    owner, _, name = repo.partition("/")
    if not owner or not name or "/" in name:
        raise ValueError(f'Invalid input: repo_or_dir should be of the form "repo_owner/repo_name[:ref]" '
                         f"(got {github!r})")
    return owner, name, ref or "main"


def _get_cache_or_reload(github, force_reload, verbose=True):
    owner, name, ref = _parse_repo_info(github)
    hub_dir = get_dir()
    os.makedirs(hub_dir, exist_ok=True)
    repo_dir = os.path.join(hub_dir, "_".join([owner, name, ref.replace("/", "_")]))
    if os.path.exists(repo_dir) and not force_reload:
        if verbose:
            sys.stderr.write(f"Using cache found in {repo_dir}\n")
        return repo_dir
    url = f"https://github.com/{owner}/{name}/zipball/{ref}"
    cached_zip = os.path.join(hub_dir, os.path.basename(repo_dir) + ".zip")
    if verbose:
        sys.stderr.write(f'Downloading: "{url}" to {cached_zip}\n')
    download_url_to_file(url, cached_zip, progress=False)
    with zipfile.ZipFile(cached_zip) as z:
        top = z.namelist()[0].split("/")[0]
        z.extractall(hub_dir)
    os.remove(cached_zip)
    shutil.rmtree(repo_dir, ignore_errors=True)
    shutil.move(os.path.join(hub_dir, top), repo_dir)
    return repo_dir


def _repo_dir(repo_or_dir, source, force_reload, verbose):
    source = source.lower()
    if source not in ("github", "local"):
        raise ValueError(f'Unknown source: "{source}". Allowed values: "github" | "local".')
    if source == "local":
        if not os.path.isdir(repo_or_dir):
            raise FileNotFoundError(f"torch.hub: '{repo_or_dir}' is not a directory (source='local')")
        return repo_or_dir
    return _get_cache_or_reload(repo_or_dir, force_reload, verbose)


def _load_hubconf(repo_dir):
    path = os.path.join(repo_dir, MODULE_HUBCONF)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"torch.hub: there is no {MODULE_HUBCONF} in {repo_dir}")
    sys.path.insert(0, repo_dir)
    try:
        module = _import_module(MODULE_HUBCONF[:-3], path)
    finally:
        sys.path.remove(repo_dir)
    missing = [d for d in getattr(module, VAR_DEPENDENCY, None) or [] if importlib.util.find_spec(d) is None]
    if missing:
        raise RuntimeError(f"Missing dependencies: {', '.join(missing)}")
    return module


def _entry(module, model):
    if not isinstance(model, str):
        raise ValueError("Invalid input: model should be a string of function name")
    func = getattr(module, model, None)
    if func is None or not callable(func):
        raise RuntimeError(f"Cannot find callable {model} in hubconf")
    return func


def list(github, force_reload=False, skip_validation=False, trust_repo=None, verbose=True, source="github"):
    """The entry points (public callables) of the repository's hubconf.py."""
    module = _load_hubconf(_repo_dir(github, source, force_reload, verbose))
    return [f for f in dir(module) if callable(getattr(module, f)) and not f.startswith("_")]


def help(github, model, force_reload=False, skip_validation=False, trust_repo=None, source="github"):
    """The docstring of the entry point `model`."""
    module = _load_hubconf(_repo_dir(github, source, force_reload, True))
    return _entry(module, model).__doc__


def load(repo_or_dir, model, *args, source="github", trust_repo=None, force_reload=False, verbose=True,
         skip_validation=False, **kwargs):
    """entry_point(*args, **kwargs) from the repository's hubconf.py."""
    repo_dir = _repo_dir(repo_or_dir, source, force_reload, verbose)
    return _load_local(repo_dir, model, *args, **kwargs)


def _load_local(hubconf_dir, model, *args, **kwargs):
    sys.path.insert(0, hubconf_dir)
    try:
        module = _load_hubconf(hubconf_dir)
        return _entry(module, model)(*args, **kwargs)
    finally:
        if hubconf_dir in sys.path:
            sys.path.remove(hubconf_dir)
