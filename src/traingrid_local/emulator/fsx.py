"""Adaptation (moto 5.2.5): FSx for Lustre file systems that hydrate, hold files and export.

moto's FSx never leaves a create call's state (no ``Lifecycle``), drops ``ImportPath`` and
``ExportPath``, ignores ``ClientRequestToken``, and has no data repository tasks. Here:

- ``Lifecycle`` is CREATING, then AVAILABLE after ``HYDRATE_SECONDS`` of simulated time (or
  FAILED with ``FailureDetails`` under the ``fsx-create-failed`` fault);
- ``LustreConfiguration.DataRepositoryConfiguration`` echoes Import/ExportPath, with a MountName;
- a repeated ``ClientRequestToken`` returns the file system it created, as FSx does;
- each file system holds files (``files``: path → bytes) that the emulated training job writes;
- ``CreateDataRepositoryTask``/``DescribeDataRepositoryTasks`` run EXPORT_TO_REPOSITORY tasks,
  PENDING → EXECUTING → SUCCEEDED (or FAILED under ``export-failed``), reporting progress while
  they execute (``StartTime``, ``Status`` counts and ``LastUpdatedTime``: each file is done when
  the bytes before it have been copied at a steady rate), and on success the exported files
  really appear in S3 under the export path;
- ``DescribeDataRepositoryTasks`` honours its ``file-system-id`` and ``task-lifecycle`` filters;
- a Lustre file system's capacity, ``PerUnitStorageThroughput``, ``ImportPath`` and
  ``FileSystemTypeVersion`` are checked against its deployment type as FSx checks them (moto
  takes any), with a BadRequest;
- its ``FileSystemTypeVersion`` is recorded and described (moto drops it), FSx's default when
  the request names none: 2.10, or 2.12 for PERSISTENT_2 (:func:`type_version`); the emulated
  node refuses to mount a version its Lustre client cannot (:mod:`.workload`);
- a deleted file system's files are kept aside (:func:`deleted`), so tests can check that
  nothing was deleted before it was archived.
"""

from __future__ import annotations

import json
import secrets
import threading
from datetime import datetime
from typing import Any

from moto.core.exceptions import JsonRESTError
from moto.fsx.exceptions import FileSystemNotFound
from moto.fsx.models import FileSystem, FSxBackend
from moto.fsx.responses import FSxResponse
from moto.s3.models import s3_backends

from traingrid_local.emulator import fault_injection
from traingrid_local.emulator.attached import Attached
from traingrid_local.emulator.clock import CLOCK
from traingrid_local.emulator.patching import PATCHES
from traingrid_local.emulator.stores import SnapshotDict

HYDRATE_SECONDS = 8 * 60
EXPORT_PENDING_SECONDS = 20
EXPORT_SECONDS = 4 * 60
_LOCK = threading.Lock()


def _age(since: datetime) -> float:
    return (CLOCK.now() - since).total_seconds()


# --- File systems ----------------------------------------------------------------------------

# On each file system: when it was created (simulated), its files (path → bytes), whether it
# fails to hydrate (fsx-create-failed); ``fs.files`` and the others as attributes.
CREATED_AT: Attached[datetime] = Attached("created_at")
FILES: Attached[dict[str, bytes]] = Attached("files")
FAILS_HYDRATING: Attached[bool] = Attached("fails_hydrating")
TYPE_VERSION: Attached[str] = Attached("file_system_type_version")

# botocore, CreateFileSystemRequest.FileSystemTypeVersion: "Valid values are 2.10, 2.12, and
# 2.15: 2.10 is supported by the Scratch and Persistent_1 Lustre deployment types. [...]
# Default value is 2.10, except for the following deployments: Default value is 2.12 when
# DeploymentType is set to PERSISTENT_2 without a metadata configuration mode. Default value
# is 2.15 when DeploymentType is set to PERSISTENT_2 with a metadata configuration mode."
LUSTRE_VERSIONS = ("2.10", "2.12", "2.15")


def default_type_version(lustre: dict[str, Any]) -> str:
    """The Lustre version FSx gives a file system whose request names none."""
    if lustre.get("DeploymentType") == "PERSISTENT_2":
        return "2.15" if lustre.get("MetadataConfiguration") else "2.12"
    return "2.10"


def type_version(fs: FileSystem) -> str:
    """A Lustre file system's version (FileSystemTypeVersion)."""
    return TYPE_VERSION.get(fs) or default_type_version(fs.lustre_configuration or {})



def _init(previous: Any) -> Any:
    def init(self: FileSystem, *args: Any, **kwargs: Any) -> None:
        previous(self, *args, **kwargs)
        CREATED_AT.set(self, CLOCK.now())
        FILES.set(self, {})
        FAILS_HYDRATING.set(self, fault_injection.CURRENT.on("fsx-create-failed"))
        lustre = self.lustre_configuration
        if lustre is not None:
            repository: dict[str, Any] = {
                k: lustre.pop(k) for k in ("ImportPath", "ExportPath") if k in lustre}
            if repository:
                repository["Lifecycle"] = "AVAILABLE"
                lustre["DataRepositoryConfiguration"] = repository
            lustre.setdefault(
                "MountName", "fsx" if lustre.get("DeploymentType") == "SCRATCH_1"
                else secrets.token_hex(4)
            )

    return init


def lifecycle(fs: FileSystem) -> str:
    if _age(CREATED_AT.of(fs)) < HYDRATE_SECONDS:
        return "CREATING"
    return "FAILED" if FAILS_HYDRATING.of(fs) else "AVAILABLE"


def _to_dict(previous: Any) -> Any:
    def to_dict(self: FileSystem) -> dict[str, Any]:
        out = previous(self)
        out["Lifecycle"] = lifecycle(self)
        out["CreationTime"] = CREATED_AT.of(self).timestamp()
        out["OwnerId"] = self.backend.account_id
        if self.file_system_type == "LUSTRE":
            out["FileSystemTypeVersion"] = type_version(self)
        if out["Lifecycle"] == "FAILED":
            out["FailureDetails"] = {
                "Message": "Unable to import the data repository: access denied to the "
                           "import path (simulated fault fsx-create-failed)"
            }
        return out

    return to_dict


# FSx for Lustre's rules (User Guide, "Deployment options"; API CreateFileSystem): capacity
# 1,200, 2,400 GiB, then steps of 3,600 (SCRATCH_1) or 2,400; the throughput per TiB each
# persistent type takes (and needs); PERSISTENT_2 links S3 only by data repository association.
_LUSTRE_STEP_GIB = {"SCRATCH_1": 3600, "SCRATCH_2": 2400, "PERSISTENT_1": 2400,
                    "PERSISTENT_2": 2400}
_LUSTRE_PER_UNIT = {"PERSISTENT_1": (50, 100, 200), "PERSISTENT_2": (125, 250, 500, 1000)}


def lustre_problems(capacity: int, lustre: dict[str, Any],
                    version: str | None = None) -> list[str]:
    """Why FSx would refuse this Lustre file system (SSD storage, at FileSystemTypeVersion
    ``version``, None: FSx's default), if it would."""
    kind = lustre.get("DeploymentType", "SCRATCH_1")
    if kind not in _LUSTRE_STEP_GIB:
        return [f"unknown DeploymentType {kind}"]
    problems = []
    if capacity not in (1200, 2400) and (capacity <= 0 or capacity % _LUSTRE_STEP_GIB[kind]):
        problems.append(f"StorageCapacity {capacity} is not valid for {kind}: 1200, 2400 or a "
                        f"multiple of {_LUSTRE_STEP_GIB[kind]} GiB")
    per_unit = lustre.get("PerUnitStorageThroughput")
    allowed = _LUSTRE_PER_UNIT.get(kind)
    if allowed is None and per_unit is not None:
        problems.append(f"PerUnitStorageThroughput is not supported for {kind}")
    elif allowed is not None and per_unit not in allowed:
        problems.append(f"{kind} needs PerUnitStorageThroughput, one of "
                        f"{', '.join(map(str, allowed))}")
    if kind == "PERSISTENT_2" and ("ImportPath" in lustre or "ExportPath" in lustre):
        problems.append("ImportPath and ExportPath are not supported for PERSISTENT_2; link "
                        "S3 with a data repository association")
    if version is not None and version not in LUSTRE_VERSIONS:
        problems.append(f"FileSystemTypeVersion {version} is not valid: one of "
                        f"{', '.join(LUSTRE_VERSIONS)}")
    elif version == "2.10" and kind == "PERSISTENT_2":
        # botocore, CreateFileSystemLustreConfiguration.DeploymentType: "If you choose
        # PERSISTENT_2, and you set FileSystemTypeVersion to 2.10, the CreateFileSystem
        # operation fails."
        problems.append("FileSystemTypeVersion 2.10 is not supported for PERSISTENT_2")
    return problems


def _create_file_system(previous: Any) -> Any:
    def create_file_system(self: FSxBackend, client_request_token: str | None = None,
                            **kwargs: Any) -> FileSystem:
        version = kwargs.get("file_system_type_version")
        if kwargs.get("file_system_type") == "LUSTRE":
            problems = lustre_problems(int(kwargs.get("storage_capacity") or 0),
                                       kwargs.get("lustre_configuration") or {}, version)
            if problems:
                raise JsonRESTError("BadRequest", "; ".join(problems))
        with _LOCK:
            tokens = self.__dict__.setdefault("tokens", {})
            if client_request_token and client_request_token in tokens:
                existing = self.file_systems.get(tokens[client_request_token])
                if existing is not None:
                    return existing
            fs = previous(self, client_request_token=client_request_token, **kwargs)
            if version:
                TYPE_VERSION.set(fs, version)
            if client_request_token:
                tokens[client_request_token] = fs.file_system_id
            return fs

    return create_file_system


def export_path(fs: FileSystem) -> str | None:
    repository = (fs.lustre_configuration or {}).get("DataRepositoryConfiguration", {})
    return repository.get("ExportPath")


def export_files(account_id: str, fs: FileSystem, files: dict[str, bytes]) -> int:
    """Copy files (path on the file system → bytes) to S3 below the file system's ExportPath,
    as an export task or ``lfs hsm_archive`` does; how many were copied."""
    bucket, _, root = (export_path(fs) or "").removeprefix("s3://").partition("/")
    if not bucket:
        return 0
    s3 = s3_backends[account_id]["aws"]
    for path, data in files.items():
        s3.put_object(bucket, f"{root.strip('/')}/{path}".lstrip("/"), data)
    return len(files)


# --- Data repository tasks ----------------------------------------------------------------


class ExportTask:
    def __init__(self, backend: FSxBackend, fs: FileSystem, paths: list[str],
                 token: str | None) -> None:
        self.task_id = "task-" + secrets.token_hex(9)
        self.fs_id = fs.file_system_id
        self.paths = [p.strip("/") for p in paths] or [""]
        self.token = token
        self.created_at = CLOCK.now()
        self.fails = fault_injection.CURRENT.on("export-failed")
        self.arn = f"arn:aws:fsx:{backend.region_name}:{backend.account_id}:task/{self.task_id}"
        self.exported: int | None = None
        self.failure: str | None = None
        self.backend = backend

    def _selected(self) -> dict[str, bytes]:
        fs = self.backend.file_systems.get(self.fs_id)
        files = FILES.of(fs) if fs is not None else {}
        return {
            path: data for path, data in sorted(files.items())
            if any(p == "" or path == p or path.startswith(p + "/") for p in self.paths)
        }

    def progress(self) -> tuple[int, int, float]:
        """(files done, files in all, when the count last changed) of an executing export."""
        start = self.created_at.timestamp() + EXPORT_PENDING_SECONDS
        sizes = [max(1, len(data)) for data in self._selected().values()]
        total_bytes, copied, done, updated = sum(sizes), 0, 0, start
        now = CLOCK.timestamp()
        for size in sizes:
            copied += size
            finished = start + EXPORT_SECONDS * copied / total_bytes
            if finished > now:
                break
            done, updated = done + 1, finished
        return done, len(sizes), updated

    def lifecycle(self) -> str:
        age = _age(self.created_at)
        if age < EXPORT_PENDING_SECONDS:
            return "PENDING"
        if age < EXPORT_PENDING_SECONDS + EXPORT_SECONDS:
            return "EXECUTING"
        if self.fails or self.failure:
            return "FAILED"
        if self.exported is None:
            try:
                self.exported = self._export()
            except Exception as error:  # noqa: BLE001 - FSx reports it on the task
                self.failure = f"Export to the data repository failed: {error}"
                return "FAILED"
        return "SUCCEEDED"

    def _export(self) -> int:
        fs = self.backend.file_systems.get(self.fs_id)
        return 0 if fs is None else export_files(self.backend.account_id, fs, self._selected())

    def to_dict(self) -> dict[str, Any]:
        state = self.lifecycle()
        out: dict[str, Any] = {
            "TaskId": self.task_id, "Lifecycle": state, "Type": "EXPORT_TO_REPOSITORY",
            "CreationTime": self.created_at.timestamp(), "ResourceARN": self.arn,
            "FileSystemId": self.fs_id, "Paths": self.paths, "Report": {"Enabled": False},
        }
        if state == "FAILED":
            out["FailureDetails"] = {"Message": self.failure or (
                "Export to the data repository failed: S3 returned AccessDenied "
                "(simulated fault export-failed)")}
        start = self.created_at.timestamp() + EXPORT_PENDING_SECONDS
        if state != "PENDING":
            out["StartTime"] = start
        if state == "EXECUTING":
            done, total, updated = self.progress()
            out["Status"] = {"TotalCount": total, "SucceededCount": done, "FailedCount": 0,
                             "LastUpdatedTime": updated}
        if state in ("SUCCEEDED", "FAILED"):
            out["EndTime"] = start + EXPORT_SECONDS
        if state == "SUCCEEDED":
            out["Status"] = {"TotalCount": self.exported, "SucceededCount": self.exported,
                             "FailedCount": 0, "LastUpdatedTime": start + EXPORT_SECONDS}
        return out


def create_data_repository_task(self: FSxBackend, file_system_id: str, task_type: str,
                                paths: list[str], token: str | None) -> ExportTask:
    fs = self.file_systems.get(file_system_id)
    if fs is None:
        raise FileSystemNotFound(file_system_id)
    if task_type != "EXPORT_TO_REPOSITORY":
        raise JsonRESTError("BadRequest", f"the emulator supports EXPORT_TO_REPOSITORY only, "
                                          f"not {task_type}")
    if export_path(fs) is None:
        raise JsonRESTError("BadRequest", f"file system {file_system_id} has no data "
                                          "repository to export to")
    tasks: dict[str, ExportTask] = self.__dict__.setdefault("export_tasks",
                                                                  SnapshotDict())
    for task in tasks.values():
        if token and task.token == token and task.fs_id == file_system_id:
            return task
        if task.fs_id == file_system_id and task.lifecycle() in ("PENDING", "EXECUTING"):
            raise JsonRESTError("DataRepositoryTaskExecuting",
                                f"task {task.task_id} is still running on {file_system_id}")
    task = ExportTask(self, fs, paths, token)
    tasks[task.task_id] = task
    return task


def _response_create_task(self: FSxResponse) -> str:
    params = json.loads(self.body)
    task = create_data_repository_task(
        self.fsx_backend, params["FileSystemId"], params["Type"], params.get("Paths", []),
        params.get("ClientRequestToken"),
    )
    return json.dumps({"DataRepositoryTask": task.to_dict()})


TASK_FILTERS = {"file-system-id": lambda task: task.fs_id,
                "task-lifecycle": lambda task: task.lifecycle()}


def _response_describe_tasks(self: FSxResponse) -> str:
    params = json.loads(self.body)
    tasks = self.fsx_backend.__dict__.get("export_tasks", {})
    wanted = params.get("TaskIds")
    if wanted and (missing := [t for t in wanted if t not in tasks]):
        raise JsonRESTError("DataRepositoryTaskNotFound", f"no task {missing[0]}")
    selected = [tasks[t] for t in wanted] if wanted else list(tasks.values())
    for item in params.get("Filters", []):
        if item["Name"] not in TASK_FILTERS:
            raise JsonRESTError("BadRequest", f"the emulator filters tasks by "
                                              f"{', '.join(TASK_FILTERS)}, not {item['Name']}")
        value_of = TASK_FILTERS[item["Name"]]
        selected = [t for t in selected if value_of(t) in item["Values"]]
    return json.dumps({"DataRepositoryTasks": [t.to_dict() for t in selected]})


# --- Deleted file systems ------------------------------------------------------------------



def _delete_file_system(previous: Any) -> Any:
    def delete_file_system(self: FSxBackend, file_system_id: str, *args: Any,
                            **kwargs: Any) -> Any:
        fs = self.file_systems.get(file_system_id)
        tags = {t["Key"]: t["Value"] for t in self.list_tags_for_resource(fs.resource_arn)} \
            if fs is not None else {}
        result = previous(self, file_system_id, *args, **kwargs)
        if fs is not None:
            self.__dict__.setdefault("deleted", {})[file_system_id] = {
                "tags": tags, "files": dict(FILES.of(fs)), "deleted_at": CLOCK.now()}
        return result

    return delete_file_system


def deleted(backend: FSxBackend) -> dict[str, dict[str, Any]]:
    """File system id → its tags, the files it held and when it was deleted."""
    return dict(backend.__dict__.get("deleted", {}))


def apply() -> None:
    PATCHES.wrap(FileSystem, "__init__", _init)
    PATCHES.wrap(FileSystem, "to_dict", _to_dict)
    PATCHES.wrap(FSxBackend, "create_file_system", _create_file_system)
    PATCHES.add(FSxBackend, "create_data_repository_task", create_data_repository_task)
    PATCHES.wrap(FSxBackend, "delete_file_system", _delete_file_system)
    # moto routes X-Amz-Target operations to same-named response methods.
    PATCHES.add(FSxResponse, "create_data_repository_task", _response_create_task)
    PATCHES.add(FSxResponse, "describe_data_repository_tasks", _response_describe_tasks)
