"""sglang-port-conflict: eight single-GPU SGLang servers on one node (--rollout-num-gpus-per-engine 1).
One server's HTTP port is already taken by a neighbour's distributed-init ports, so it never
comes up and the engine actor gives up on `/get_model_info`.
"""

from __future__ import annotations

from common import (ROLLOUT, Log, base_flags, engine, example_dir, expected, multiline_command, placement,
                    ray_submit_banner, write_text)

NAME = "sglang-port-conflict"
BAD = engine(3395)

ENGINE_TB = """Traceback (most recent call last):
  File "/usr/local/lib/python3.12/dist-packages/urllib3/connection.py", line 198, in _new_conn
    sock = connection.create_connection(
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/usr/local/lib/python3.12/dist-packages/urllib3/util/connection.py", line 85, in create_connection
    raise err
  File "/usr/local/lib/python3.12/dist-packages/urllib3/util/connection.py", line 73, in create_connection
    sock.connect(sa)
ConnectionRefusedError: [Errno 111] Connection refused

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/usr/local/lib/python3.12/dist-packages/requests/adapters.py", line 667, in send
    resp = conn.urlopen(
           ^^^^^^^^^^^^^
  File "/usr/local/lib/python3.12/dist-packages/urllib3/connectionpool.py", line 841, in urlopen
    retries = retries.increment(
              ^^^^^^^^^^^^^^^^^^
  File "/usr/local/lib/python3.12/dist-packages/urllib3/util/retry.py", line 519, in increment
    raise MaxRetryError(_pool, url, reason) from reason  # type: ignore[arg-type]
    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
urllib3.exceptions.MaxRetryError: HTTPConnectionPool(host='10.0.0.11', port=15500): Max retries exceeded with url: /get_model_info (Caused by NewConnectionError('<urllib3.connection.HTTPConnection object at 0x7f3a2c9e1d90>: Failed to establish a new connection: [Errno 111] Connection refused'))

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/root/slime/slime/backends/sglang_utils/sglang_engine.py", line 168, in init
    self._wait_server_ready()
  File "/root/slime/slime/backends/sglang_utils/sglang_engine.py", line 203, in _wait_server_ready
    response = requests.get(f"http://{self.server_host}:{self.server_port}/get_model_info", timeout=5)
               ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/usr/local/lib/python3.12/dist-packages/requests/api.py", line 73, in get
    return request("get", url, params=params, **kwargs)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/usr/local/lib/python3.12/dist-packages/requests/adapters.py", line 700, in send
    raise ConnectionError(e, request=request)
requests.exceptions.ConnectionError: HTTPConnectionPool(host='10.0.0.11', port=15500): Max retries exceeded with url: /get_model_info (Caused by NewConnectionError('<urllib3.connection.HTTPConnection object at 0x7f3a2c9e1d90>: Failed to establish a new connection: [Errno 111] Connection refused'))"""


def build() -> None:
    d = example_dir(NAME)
    flags = base_flags()
    flags.update(rollout_num_gpus_per_engine=1, tensor_model_parallel_size=1, sequence_parallel=False)
    write_text(d / "cmdline.txt", multiline_command(flags))
    log = Log("2026-08-06 11:20:02", seed=61)
    ray_submit_banner(log, "raysubmit_Hd2Tq6Wc9Zs1Ny4B")
    log.tick(6)
    placement(log, 8)
    log.log("import slime.rollout.sglang_rollout.generate_rollout as generate_rollout function.", "rollout.py:396", ROLLOUT, dt_s=3)
    for e in range(8):
        port = 15000 + 100 * e
        log.log(
            f"Launch HttpServerEngineAdapter at: 10.0.0.11:{port}", "sglang_engine.py:141", engine(3310 + 17 * e),
        )
        log.log(
            f"server_args=ServerArgs(model_path='/root/Qwen2.5-7B-Instruct/', tokenizer_path='/root/Qwen2.5-7B-Instruct/', "
            f"host='10.0.0.11', port={port}, nccl_port={port + 1}, mem_fraction_static=0.7, tp_size=1, dp_size=1, "
            f"base_gpu_id={e}, dist_init_addr='10.0.0.11:{port + 92}', enable_memory_saver=True, skip_server_warmup=True)",
            "server_args.py:2614", engine(3310 + 17 * e),
        )
    log.tick(9)
    log.raw("INFO:     Started server process [3396]", BAD)
    log.raw("INFO:     Waiting for application startup.", BAD)
    log.raw("INFO:     Application startup complete.", BAD)
    log.raw("ERROR:    [Errno 98] error while attempting to bind on address ('10.0.0.11', 15500): address already in use", BAD)
    log.raw("INFO:     Waiting for application shutdown.", BAD)
    log.raw("INFO:     Application shutdown complete.", BAD)
    log.tick(34)
    for e in (0, 1, 2, 3, 4, 6, 7):
        log.log("The server is fired up and ready to roll!", "http_server.py:1213", engine(3310 + 17 * e))
    log.tick(61)
    log.raw(ENGINE_TB, BAD)
    log.tick(1)
    log.raw("Traceback (most recent call last):")
    log.raw('  File "/root/slime/train.py", line 104, in <module>')
    log.raw("    train(args)")
    log.raw('  File "/root/slime/train.py", line 20, in train')
    log.raw('    rollout_manager, num_rollout_per_epoch = create_rollout_manager(args, pgs["rollout"])')
    log.raw("                                             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^")
    log.raw('  File "/root/slime/slime/ray/placement_group.py", line 236, in create_rollout_manager')
    log.raw("    ray.get(rollout_manager.init_engines.remote())")
    log.raw('  File "/usr/local/lib/python3.12/dist-packages/ray/_private/worker.py", line 2961, in get')
    log.raw("    values, debugger_breakpoint = worker.get_objects(object_refs, timeout=timeout)")
    log.raw("                                  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^")
    log.raw('  File "/usr/local/lib/python3.12/dist-packages/ray/_private/worker.py", line 1026, in get_objects')
    log.raw("    raise value.as_instanceof_cause()")
    log.raw("ray.exceptions.RayTaskError(ConnectionError): ray::RolloutManager.init_engines() (pid=3012, ip=10.0.0.11, "
            "actor_id=8d1f6a0b2c3e4d5f6a7b8c9d01000000, repr=<slime.ray.rollout.RolloutManager object at 0x7f8e4c2a1b10>)")
    log.raw("requests.exceptions.ConnectionError: HTTPConnectionPool(host='10.0.0.11', port=15500): Max retries exceeded with "
            "url: /get_model_info (Caused by NewConnectionError('<urllib3.connection.HTTPConnection object at 0x7f3a2c9e1d90>: "
            "Failed to establish a new connection: [Errno 111] Connection refused'))")
    log.raw("---------------------------------------")
    log.raw("Job 'raysubmit_Hd2Tq6Wc9Zs1Ny4B' failed")
    log.raw("---------------------------------------")
    write_text(d / "job.log", log.text())
    expected(d, "engine.port_conflict",
             "eight 1-GPU SGLang servers on one node; one cannot bind 15500 ('address already in use') and the engine fails with "
             "'Max retries exceeded with url: /get_model_info (Caused by NewConnectionError'")


if __name__ == "__main__":
    build()
