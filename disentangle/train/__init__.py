"""Training: one trainer for every method, its runs, data, checkpoints and writers.

The route from the loop to the loss, outermost first::

    trainer.loop                      for each step: phase = method.phase(step) (on the host)
      trainer.phase_step              built once per phase; lists the wrappers in order:
        device_data.DeviceData.compose    1. the batch gathered from the set on the device
        codes.overlapped                  2. or: the runs in two groups, host solves overlapped
        host.jit                          3. state donated, shardings of the program's mesh
        runs.Program.runs_step            4. the runs over the leading axis (runs.Runs)
          codes.step / codes.runs_step    5. a phase with discrete codes: costs, solve, update
            VAEMethod.train_step /            the method's step (methods/base.py): descend,
              train_step_given_codes          the gradient of every group's parameters
                <method>.loss                  the paper's loss, (scalar, metrics)

One run on one device is steps 3 and 5: ``jit(method.train_step)``, or after CascadeVAE's t_d
``jit(codes.step(method))``.
"""
