#!/bin/bash
# One device call: §8 probes (C++ driver API) + per-phase launch accounting under PyTorch.
set -u
O=${OUT:-/tmp/out}; G=$(cd "$(dirname "$0")" && pwd); S=$G/libvgpumem.so
{ echo "date $(date -u +%FT%TZ)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > $O/probe.txt
( timeout 120 $G/probe all; timeout 30 $G/probe unmap; timeout 30 $G/probe fault0; timeout 30 $G/probe fault1; CUDA_MODULE_LOADING=LAZY timeout 30 $G/probe params ) >> $O/probe.txt 2>&1
for ph in elementwise matmul_fp32 matmul_bf16 conv sdpa triton compile; do
  timeout 120 python3 $G/phases.py $ph profile >> $O/phases.txt 2>>$O/log.txt
  LD_PRELOAD=$S VGPUMEM_TRACE=$O/t_$ph.json timeout 120 python3 $G/phases.py $ph >> $O/phases.txt 2>>$O/log.txt
  python3 -c "import json,sys; s=json.load(open('$O/t_$ph.json'))['vgpumem']; print('SHIM', json.dumps({'phase':'$ph','launches':s['launches'],'by_entry':s['launches_by_entry_point'],'lookups':len(s['lookups']),'unhooked_lookups_in_table':[l['name'] for l in s['lookups'] if not l['hooked'] and l['name'] in ('cuLaunchKernel','cuLaunchKernelEx','cuMemAlloc','cuMemCreate','cuGraphLaunch')]}))" >> $O/phases.txt 2>>$O/log.txt
  rm -f $O/t_$ph.json
done
# §8.10: the profiler with the shim loaded
LD_PRELOAD=$S timeout 120 python3 $G/phases.py conv profile >> $O/phases.txt 2>>$O/log.txt || echo "PROFILER_WITH_SHIM failed rc=$?" >> $O/phases.txt
# overhead: step time with/without the shim, interleaved, 3 rounds
for r in 1 2 3; do
  CUBLAS_WORKSPACE_CONFIG=:4096:8 timeout 120 python3 $G/torch_cap.py noshim_r$r 2>>$O/log.txt | sed 's/^RESULT /R /' | python3 -c "import json,sys; d=json.loads(sys.stdin.read()[2:]); print('STEP', d['mode'], d['cnn_step_ms_median'], d['cnn_loss'])" >> $O/phases.txt
  CUBLAS_WORKSPACE_CONFIG=:4096:8 LD_PRELOAD=$S timeout 120 python3 $G/torch_cap.py shim_r$r 2>>$O/log.txt | sed 's/^RESULT /R /' | python3 -c "import json,sys; d=json.loads(sys.stdin.read()[2:]); print('STEP', d['mode'], d['cnn_step_ms_median'], d['cnn_loss'])" >> $O/phases.txt
done
cat $O/probe.txt; cat $O/phases.txt
