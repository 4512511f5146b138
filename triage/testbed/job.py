"""One process of a testbed job: a training rank, and on rank 0 the rollout manager and engine too.

The loop is slime's `train.py`: push weights, then per rollout generate (rank 0),
hand the rollout to every rank, train, save at `--save-interval`, sync weights back to
the engine. Failures are logged as a Ray job logs them: the actor's traceback with its
`(MegatronTrainRayActor pid=N)` prefix, then the driver's `RayTaskError`.
"""

from __future__ import annotations

import argparse
import os
import traceback
from pathlib import Path

from triage.testbed import arguments
from triage.testbed.comm import Comm
from triage.testbed.faults import plugs_for
from triage.testbed.slime_log import ROLLOUT_MANAGER, SGLANG_ENGINE, TRAIN_ACTOR, SlimeLog, megatron_arguments_block

EXIT_OK = 0
EXIT_FAILED = 1


def should_save(args: argparse.Namespace, rollout_id: int) -> bool:
    if not args.save:
        return False
    if args.save_interval is not None and (rollout_id + 1) % args.save_interval == 0:
        return True
    return rollout_id == args.num_rollout - 1


class Job:
    def __init__(self, args: argparse.Namespace, argv: list[str]) -> None:
        arguments.validate(args, [])
        self.args = args
        self.argv = argv
        self.rank = args.testbed_rank or 0
        self.world = 1 if args.debug_rollout_only else args.tensor_model_parallel_size * args.pipeline_model_parallel_size
        pid = os.getpid()
        self.log = SlimeLog(args.testbed_log, pids={TRAIN_ACTOR: pid, ROLLOUT_MANAGER: pid + 1, SGLANG_ENGINE: pid + 2})
        self.plugs = plugs_for(args.testbed_fault)
        self.comm: Comm | None = None
        self.engine = None
        self.rollout = None
        self.actor = None
        self.http = None

    def close(self) -> None:
        if self.http is not None:
            self.http.stop()
        if self.comm is not None:
            self.comm.shutdown()
        self.log.close()

    # -- set-up ------------------------------------------------------------------------------
    def _tokenizer_and_shape(self):
        """The tokenizer (rank 0 only: the other ranks never see text) and the model shape."""
        from triage.testbed.hf_models import ModelShape, shape_from_config_file

        args = self.args
        if not args.hf_checkpoint:
            raise arguments.ArgumentError("--hf-checkpoint is required (tokenizer and engine weights)")
        tok = None
        if self.rank == 0:
            from triage.testbed.tokenizer import load_tokenizer

            tok = load_tokenizer(Path(args.hf_checkpoint))
        shape, config_vocab = shape_from_config_file(Path(args.hf_checkpoint))
        if args.num_layers is not None:
            shape = ModelShape(
                arch=shape.arch,
                hidden_size=args.hidden_size or shape.hidden_size,
                ffn_hidden_size=args.ffn_hidden_size or shape.ffn_hidden_size,
                num_layers=args.num_layers,
                num_attention_heads=args.num_attention_heads or shape.num_attention_heads,
                num_query_groups=args.num_query_groups or shape.num_query_groups,
                rotary_base=args.rotary_base,
                norm_epsilon=args.norm_epsilon,
                max_position_embeddings=args.max_position_embeddings,
            )
        vocab = args.vocab_size or config_vocab
        return tok, shape, vocab

    def _make_engine(self, tokenizer=None):
        from triage.testbed.engine import Engine

        args = self.args
        dump = Path(args.testbed_engine_dump) if args.testbed_engine_dump else None
        engine = Engine(Path(args.hf_checkpoint), release_buffers=self.plugs.engine_release_buffers, dump_dir=dump)
        if args.use_http_engine:
            from triage.testbed.http_engine import EngineServer, HttpEngineClient

            self.http = EngineServer(engine, tokenizer=tokenizer).start()
            self.log.info(f"Launch HttpServerEngineAdapter at: 127.0.0.1:{self.http.port}", "engine_launch",
                          actor=SGLANG_ENGINE)
            return engine, HttpEngineClient(self.http.url)
        return engine, engine

    # -- the loop ----------------------------------------------------------------------------
    def run(self) -> int:
        args = self.args
        try:
            self.comm = Comm.init(self.rank, self.world, args.testbed_master_port or 0, args.testbed_dist_timeout,
                                  skip=self.plugs.skip_collective)
            tok, shape, vocab = self._tokenizer_and_shape()
            generator = None
            if self.rank == 0 and not args.debug_train_only:
                from triage.testbed.rollout import RolloutManager

                self.log.info("import slime.rollout.sglang_rollout.generate_rollout as generate_rollout function.",
                              "rollout_import", actor=ROLLOUT_MANAGER)
                self.engine, generator = self._make_engine(tok)
                self.rollout = RolloutManager(args, tok, generator, self.log)
            elif self.rank == 0:
                from triage.testbed.rollout import RolloutManager

                self.rollout = RolloutManager(args, tok, None, self.log)
            start = args.start_rollout_id or 0
            if not args.debug_rollout_only:
                start = self._init_actor(shape, vocab)
            if self.rollout is not None and self.rollout.data is not None:
                self.rollout.data.skip_rollouts(start, args.rollout_batch_size)
            self.update_weights(first=True)
            for rollout_id in range(start, args.num_rollout):
                self.one_rollout(rollout_id)
            return EXIT_OK
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # the job dies: log it the way Ray reports an actor failure
            self._log_failure(exc)
            return EXIT_FAILED

    def _init_actor(self, shape, vocab) -> int:
        from triage.testbed.actor import MegatronActor
        from triage.testbed.memory import GpuMemory

        args = self.args
        if self.rank == 0:
            self.log.print(megatron_arguments_block(arguments.printed_arguments(args)), actor=TRAIN_ACTOR)
        state = self.comm.parallel_state(args.tensor_model_parallel_size, args.pipeline_model_parallel_size,
                                         self.plugs.row_parallel_reduce)
        memory = GpuMemory(args.testbed_gpu_memory_gib, device=self.rank % 8, colocated=args.colocate,
                           engine_pid=os.getpid() + 2)
        self.actor = MegatronActor(args, shape, vocab, self.comm, state, self.log, self.plugs, memory)
        return self.actor.initialize()

    def one_rollout(self, rollout_id: int) -> None:
        args = self.args
        data = None
        if self.rank == 0:
            samples = self.rollout.generate(rollout_id)
            if args.offload_rollout and self.engine is not None:
                self.engine.release_memory_occupation()
            if not args.debug_rollout_only:
                data = self.rollout.to_train_data(samples)
        if args.debug_rollout_only:
            return
        data = self.comm.broadcast_object(data, src=0)
        self.actor.train(rollout_id, data)
        if should_save(args, rollout_id):
            with self.actor.timer.context("save_model"):
                self.actor.save(rollout_id)
        if args.offload_rollout and self.engine is not None:
            self.engine.resume_memory_occupation(["weights"])
        self.update_weights()
        if args.offload_rollout and self.engine is not None:
            self.engine.resume_memory_occupation(["kv_cache"])

    def update_weights(self, first: bool = False) -> None:
        """Every stage converts its weights (TP-gathered) to HF names; the engine on rank 0 loads them in stage order."""
        args = self.args
        if args.debug_train_only or args.debug_rollout_only or self.actor is None:
            return
        timer = self.actor.timer
        with timer.context("update_weights"):
            named = self.actor.hf_weights_for_engine()
            state = self.actor.state
            payload = (state.pp_rank, state.tp_rank, named)
            gathered = self.comm.gather_object(payload, dst=0)
            if self.rank == 0 and self.engine is not None:
                stages = sorted((p for p in gathered if p[1] == 0), key=lambda p: p[0])
                version = str(self.actor.num_steps)
                for i, (_, _, tensors) in enumerate(stages):
                    self.engine.update_weights_from_tensor(tensors, weight_version=version,
                                                           flush=i == len(stages) - 1)

    def _log_failure(self, exc: BaseException) -> None:
        from triage.testbed.comm import flight_recorder_enabled

        text = traceback.format_exc()
        actor = TRAIN_ACTOR
        self.log.traceback(text, actor=actor)
        if self.comm is not None and self.comm.distributed and flight_recorder_enabled():
            prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE")
            if prefix:
                try:
                    self.comm.dump_flight_recorder(prefix)
                except Exception:  # a dump must not hide the failure it documents
                    pass
        if self.rank == 0:
            name = type(exc).__name__
            pid = self.log.pids.get(actor)
            self.log.print(
                "Traceback (most recent call last):\n"
                '  File "/root/slime/train.py", line 104, in <module>\n    train(args)\n'
                '  File "/root/slime/train.py", line 61, in train\n'
                "    ray.get(actor_model.async_train(rollout_id, rollout_data_ref))\n"
                f"ray.exceptions.RayTaskError({name}): ray::{actor}.train() (pid={pid}, ip=127.0.0.1)\n"
                + "".join(traceback.format_exception_only(type(exc), exc)).rstrip()
            )

