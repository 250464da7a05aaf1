-- LÖVE configuration of the lumus example: one window, no audio (the example makes no
-- sound, and headless machines have no audio device), nothing else it does not use.
function love.conf(t)
  t.identity = "lumus-love-example"
  t.version = "11.4"
  t.window.title = "lumus in LÖVE: an MLP draws every frame on the GPU"
  t.window.width = 512
  t.window.height = 592
  t.window.resizable = false
  t.modules.audio = false
  t.modules.sound = false
  t.modules.joystick = false
  t.modules.physics = false
  t.modules.video = false
  t.modules.touch = false
end
