// placeholder: implemented by the layer's owner
