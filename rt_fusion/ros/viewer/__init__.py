"""viewer_node's rooms: the graph's messages as Foxglove messages (:mod:`.scene`)."""
