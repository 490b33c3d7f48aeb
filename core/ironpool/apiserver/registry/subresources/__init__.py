"""The handlers of the subresources a kind's strategy declares."""
