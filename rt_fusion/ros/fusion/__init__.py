"""fusion_node's rooms (``rt_fusion/nodes/fusion_node.py`` declares, configures, converts and
publishes): its parameters (:mod:`.params`), the surround rig's extra cameras (:mod:`.rig`) and
the worker that turns an aligned frame into fused objects (:mod:`.worker`: the inference
policy, the network, decoding, the fusion core, the frame ledger and the diagnostics values).
"""
