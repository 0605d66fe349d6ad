
BlogitsJ(w:T@à_AoôA•jã¿iŸîÀŒ±ÀÀXà>pà@f‘·@Ô­é?